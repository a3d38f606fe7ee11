package calendar

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestWindowsAcrossDSTAndMonthEnds pins the bounds where a naive "24h" or "30 days" goes
// wrong, in three zones: days of 23 and 25 hours, a month of 28 days, a year's end, and a
// zone that skips midnight itself.
func TestWindowsAcrossDSTAndMonthEnds(t *testing.T) {
	cases := []struct {
		zone, at   string // at: a local time in zone
		unit       Unit
		start, end string // local times in zone
		hours      float64
	}{
		{"Europe/Berlin", "2027-03-28 12:00", Day, "2027-03-28 00:00", "2027-03-29 00:00", 23},
		{"Europe/Berlin", "2027-10-31 23:59", Day, "2027-10-31 00:00", "2027-11-01 00:00", 25},
		{"Europe/Berlin", "2027-03-31 23:59", Month, "2027-03-01 00:00", "2027-04-01 00:00", 31*24 - 1},
		{"Europe/Berlin", "2027-02-14 08:00", Month, "2027-02-01 00:00", "2027-03-01 00:00", 28 * 24},
		{"Europe/Berlin", "2027-03-31 10:00", Week, "2027-03-29 00:00", "2027-04-05 00:00", 7 * 24},
		{"Europe/Berlin", "2027-03-28 10:00", Week, "2027-03-22 00:00", "2027-03-29 00:00", 7*24 - 1},
		{"America/New_York", "2027-03-14 01:00", Day, "2027-03-14 00:00", "2027-03-15 00:00", 23},
		{"America/New_York", "2027-11-07 01:30", Day, "2027-11-07 00:00", "2027-11-08 00:00", 25},
		{"America/New_York", "2027-11-30 23:00", Month, "2027-11-01 00:00", "2027-12-01 00:00", 30*24 + 1},
		{"America/New_York", "2027-12-31 23:59", Month, "2027-12-01 00:00", "2028-01-01 00:00", 31 * 24},
		{"America/New_York", "2028-02-29 12:00", Month, "2028-02-01 00:00", "2028-03-01 00:00", 29 * 24},
		// Chile springs forward at midnight: 2027-09-05 starts at 01:00, a day of 23 hours.
		{"America/Santiago", "2027-09-05 12:00", Day, "2027-09-05 01:00", "2027-09-06 00:00", 23},
		{"America/Santiago", "2027-09-04 12:00", Day, "2027-09-04 00:00", "2027-09-05 01:00", 24},
		{"Asia/Kolkata", "2027-06-30 23:59", Month, "2027-06-01 00:00", "2027-07-01 00:00", 30 * 24},
	}
	for _, c := range cases {
		loc := mustZone(t, c.zone)
		parse := func(s string) time.Time {
			v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		start, end := Calendar{Unit: c.unit, Location: loc}.Window(parse(c.at))
		if want := parse(c.start); !start.Equal(want) {
			t.Errorf("%s %s %s: start %s, want %s", c.zone, c.unit, c.at, start.In(loc), want)
		}
		if want := parse(c.end); !end.Equal(want) {
			t.Errorf("%s %s %s: end %s, want %s", c.zone, c.unit, c.at, end.In(loc), want)
		}
		if got := end.Sub(start).Hours(); got != c.hours {
			t.Errorf("%s %s %s: %v hours, want %v", c.zone, c.unit, c.at, got, c.hours)
		}
	}
}

// TestWindowsTileTime checks, at random instants over five years in zones with every kind of
// transition (DST at 02:00, at midnight, half-hour DST, no DST, a half-hour offset), that the
// window holds the instant, that the next window starts where it ends, that the window
// starts on the first instant of its local date (the 1st, or a Monday), and its length.
func TestWindowsTileTime(t *testing.T) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "America/Santiago",
		"Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Chatham", "America/Havana"}
	bounds := map[Unit][2]time.Duration{
		Day:   {22 * time.Hour, 26 * time.Hour},
		Week:  {7*24*time.Hour - 2*time.Hour, 7*24*time.Hour + 2*time.Hour},
		Month: {28*24*time.Hour - 2*time.Hour, 31*24*time.Hour + 2*time.Hour},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for _, z := range zones {
		loc := mustZone(t, z)
		for _, u := range Units {
			c := Calendar{Unit: u, Location: loc}
			for range 2000 {
				at := time.Unix(from+rng.Int64N(5*365*86400), rng.Int64N(1e9))
				if err := checkWindow(c, at, bounds[u]); err != nil {
					t.Fatalf("%s %s: %v", z, u, err)
				}
			}
		}
	}
}

// checkWindow is what TestWindowsTileTime asserts of the window holding at.
func checkWindow(c Calendar, at time.Time, length [2]time.Duration) error {
	loc := c.Location
	start, end := c.Window(at)
	if at.Before(start) || !at.Before(end) {
		return fmt.Errorf("%s not in [%s, %s)", at.In(loc), start.In(loc), end.In(loc))
	}
	if ns, _ := c.Window(end); !ns.Equal(end) {
		return fmt.Errorf("next window starts %s, not at the end %s", ns.In(loc), end.In(loc))
	}
	if y, m, d := start.Add(-time.Second).In(loc).Date(); y == start.In(loc).Year() && m == start.In(loc).Month() && d == start.In(loc).Day() {
		return fmt.Errorf("%s is not the first instant of its day", start.In(loc))
	}
	if l := start.In(loc); (c.Unit == Month && l.Day() != 1) || (c.Unit == Week && l.Weekday() != time.Monday) {
		return fmt.Errorf("window starts %s", l)
	}
	if n := end.Sub(start); n < length[0] || n > length[1] {
		return fmt.Errorf("window [%s, %s) lasts %s", start.In(loc), end.In(loc), n)
	}
	return nil
}

func TestNewRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		unit Unit
		zone string
	}{{"Year", "UTC"}, {"day", "UTC"}, {Day, "Mars/Olympus"}, {Day, "Local"}, {Month, "../etc/passwd"}} {
		if _, err := New(c.unit, c.zone); err == nil {
			t.Errorf("New(%q, %q) = nil error", c.unit, c.zone)
		}
	}
	if c, err := New(Month, ""); err != nil || c.Location != time.UTC {
		t.Errorf("New(Month, \"\") = %v, %v; want UTC", c, err)
	}
}

func BenchmarkWindow(b *testing.B) {
	c := Calendar{Unit: Month, Location: time.UTC}
	c.Location, _ = LoadZone("Europe/Berlin")
	at := time.Date(2027, 3, 28, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		c.Window(at)
	}
}
