package calendar

import (
	"fmt"
	"sync"
	"time"
)

// Unit is the length of a calendar window.
type Unit string

const (
	// Day runs from local midnight to the next local midnight.
	Day Unit = "Day"
	// Week runs from local midnight on Monday to the next Monday's (ISO 8601 weeks).
	Week Unit = "Week"
	// Month runs from local midnight on the 1st to the next month's 1st.
	Month Unit = "Month"
)

// Units are the units a calendar limit may name.
var Units = []Unit{Day, Week, Month}

// Calendar is a unit in a time zone: the windows of one calendar limit.
type Calendar struct {
	// Unit is the window's length.
	Unit Unit
	// Location is the time zone whose midnights bound the windows.
	Location *time.Location
}

// New checks unit and loads the IANA time zone named zone ("UTC" when empty).
func New(unit Unit, zone string) (Calendar, error) {
	if err := unit.Check(); err != nil {
		return Calendar{}, err
	}
	loc, err := LoadZone(zone)
	if err != nil {
		return Calendar{}, err
	}
	return Calendar{Unit: unit, Location: loc}, nil
}

// Check reports whether u is one of Units.
func (u Unit) Check() error {
	for _, k := range Units {
		if u == k {
			return nil
		}
	}
	return fmt.Errorf("unknown calendar unit %q: use Day, Week or Month", string(u))
}

// zones caches loaded time zones by name: time.LoadLocation reads and parses the zone's
// file on every call, too slow for a header written on every request.
var zones sync.Map // name -> *time.Location

// LoadZone loads an IANA time zone by name ("UTC" when empty), once per process. "Local" is
// refused: the sidecar's and the manager's machine zones may differ, and a window must be
// the same everywhere.
func LoadZone(zone string) (*time.Location, error) {
	if zone == "" {
		zone = "UTC"
	}
	if loc, ok := zones.Load(zone); ok {
		return loc.(*time.Location), nil
	}
	if zone == "Local" {
		return nil, fmt.Errorf("time zone %q names the machine's zone, which differs between machines: name an IANA zone such as Europe/Berlin", zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Berlin or America/New_York): %w", zone, err)
	}
	zones.Store(zone, loc)
	return loc, nil
}

// Nominal is the unit's length without DST: 24h, 168h, or 744h (31 days, the longest
// month), used where a window needs a fixed size (a bound, never a boundary).
func (u Unit) Nominal() time.Duration {
	switch u {
	case Week:
		return 7 * 24 * time.Hour
	case Month:
		return 31 * 24 * time.Hour
	default:
		return 24 * time.Hour
	}
}

// Longest bounds the length of any window of u: its nominal length and a day, room for
// every DST shift (2 hours at most, in Antarctica/Troll) and any change of a zone's offset.
func (u Unit) Longest() time.Duration { return u.Nominal() + 24*time.Hour }

// Window returns the window of c that holds t: [start, end), both local midnights (or,
// where a zone skips midnight, the first instant of the day).
func (c Calendar) Window(t time.Time) (start, end time.Time) {
	y, m, d := t.In(c.Location).Date()
	switch c.Unit {
	case Week:
		d -= (int(t.In(c.Location).Weekday()) + 6) % 7 // back to Monday
		return Midnight(y, m, d, c.Location), Midnight(y, m, d+7, c.Location)
	case Month:
		return Midnight(y, m, 1, c.Location), Midnight(y, m+1, 1, c.Location)
	default:
		return Midnight(y, m, d, c.Location), Midnight(y, m, d+1, c.Location)
	}
}

// Midnight is the first instant of the local date y-m-d in loc (normalized as time.Date
// does: day 32 is the next month's 1st). time.Date alone is not enough: for a local time
// that occurs twice (a fall-back across midnight) or never (a zone that springs forward at
// midnight) it does not say which instant it picks.
func Midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	naive := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	var first time.Time
	for _, off := range offsetsNear(naive, loc) {
		c := naive.Add(-time.Duration(off) * time.Second)
		if sameClock(c.In(loc), naive) && (first.IsZero() || c.Before(first)) {
			first = c
		}
	}
	if !first.IsZero() {
		return first
	}
	// Midnight was skipped: the day starts at the first second whose local date is this one
	// (local dates only move forward through a skip).
	lo, hi := naive.Add(-30*time.Hour).Unix(), naive.Add(30*time.Hour).Unix()
	for lo < hi {
		mid := lo + (hi-lo)/2
		if onOrAfter(time.Unix(mid, 0).In(loc), naive) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return time.Unix(lo, 0)
}

// offsetsNear lists the UTC offsets (seconds) loc has within 30 hours of naive, the only ones
// a local midnight on that date can be under.
func offsetsNear(naive time.Time, loc *time.Location) []int {
	var offs []int
	for t := naive.Add(-30 * time.Hour); !t.After(naive.Add(30 * time.Hour)); {
		_, off := t.In(loc).Zone()
		if len(offs) == 0 || offs[len(offs)-1] != off {
			offs = append(offs, off)
		}
		_, next := t.In(loc).ZoneBounds()
		if next.IsZero() || !next.After(t) {
			break
		}
		t = next
	}
	return offs
}

// sameClock reports whether local reads the wall clock of naive (a UTC time used as a
// y-m-d h:m:s).
func sameClock(local, naive time.Time) bool {
	y, m, d := local.Date()
	ny, nm, nd := naive.Date()
	h, mi, s := local.Clock()
	return y == ny && m == nm && d == nd && h == 0 && mi == 0 && s == 0 && local.Nanosecond() == 0
}

// onOrAfter reports whether local's date is naive's date or later.
func onOrAfter(local, naive time.Time) bool {
	y, m, d := local.Date()
	return !time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Before(naive)
}
