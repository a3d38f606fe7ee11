package limiter

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
)

// calendarLimits are the calendar limits of a FixedWindow policy: where their windows go in
// ARGV, and the window each last used (a window is computed once, and reused while the
// clock is in it).
type calendarLimits struct {
	limits []calendarLimit
	// common is ARGV of the common check (cost 1, no request id) for the windows last
	// used, shared read-only by every such call while the clock is in all of them.
	common atomic.Pointer[calendarArgs]
}

// calendarArgs is ARGV valid for server times in [from, until).
type calendarArgs struct {
	from, until time.Time
	args        []any
}

// calendarLimit is one calendar limit: its argument's index in limitArg, and its window.
type calendarLimit struct {
	arg int
	cal calendar.Calendar
	cur atomic.Pointer[calendarWindow]
}

// calendarWindow is one window of a calendar limit, as the script takes it.
type calendarWindow struct {
	start, end time.Time
	arg        string // "start:end" in µs
}

// newCalendarLimits collects the calendar limits of ls; nil when there are none.
func newCalendarLimits(ls []Limit) *calendarLimits {
	var c calendarLimits
	for i, l := range ls {
		if l.Calendar != nil {
			c.limits = append(c.limits, calendarLimit{arg: 2*i + 1, cal: *l.Calendar})
		}
	}
	if len(c.limits) == 0 {
		return nil
	}
	return &c
}

// window is the window of c holding at.
func (c *calendarLimit) window(at time.Time) *calendarWindow {
	if w := c.cur.Load(); w != nil && !at.Before(w.start) && at.Before(w.end) {
		return w
	}
	start, end := c.cal.Window(at)
	w := &calendarWindow{start: start, end: end,
		arg: strconv.FormatInt(start.UnixMicro(), 10) + ":" + strconv.FormatInt(end.UnixMicro(), 10)}
	c.cur.Store(w)
	return w
}

// commonArgs is the common check's ARGV at server time at: the cached one while at is in
// its windows, else a new one from build (which fills the windows holding at and says
// where they overlap).
func (c *calendarLimits) commonArgs(at time.Time, build func() (args []any, from, until time.Time)) []any {
	if a := c.common.Load(); a != nil && !at.Before(a.from) && at.Before(a.until) {
		return a.args
	}
	a := &calendarArgs{}
	a.args, a.from, a.until = build()
	c.common.Store(a)
	return a.args
}

// fill puts the calendar windows holding at into limits (a copy of the policy's limitArg)
// and returns [from, until), where they all overlap. The script keeps each key until an
// hour past its window's end, whatever the TTL.
func (c *calendarLimits) fill(limits []any, at time.Time) (from, until time.Time) {
	for i := range c.limits {
		w := c.limits[i].window(at)
		limits[c.limits[i].arg] = w.arg
		if from.IsZero() || w.start.After(from) {
			from = w.start
		}
		if until.IsZero() || w.end.Before(until) {
			until = w.end
		}
	}
	return from, until
}

// staleWindow reports the server time of a reply that says the server clock is outside a
// calendar window of the call ({-1, now_us}).
func staleWindow(v any) (time.Time, bool) {
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		return time.Time{}, false
	}
	code, ok1 := r[0].(int64)
	now, ok2 := r[1].(int64)
	if !ok1 || !ok2 || code != -1 {
		return time.Time{}, false
	}
	return time.UnixMicro(now), true
}

// HasCalendar reports whether the policy has calendar limits.
func (p *Policy) HasCalendar() bool { return p.calendars != nil }

// Now is the limiter's estimate of the Redis server clock: its own clock (Options.Now),
// corrected by what the last stale-window reply said. Calendar windows are picked on it.
func (l *Limiter) Now() time.Time {
	return l.opts.Now().Add(time.Duration(l.clockOffset.Load()))
}

// learnClock records the server time a stale-window reply gave.
func (l *Limiter) learnClock(server time.Time) {
	l.clockOffset.Store(int64(server.Sub(l.opts.Now())))
}

// withCalendarPeriods is ls with the Period of each calendar limit set to its unit's
// nominal length (a copy when any changes): what reports and checks that know only periods
// read.
func withCalendarPeriods(ls []Limit) []Limit {
	var out []Limit
	for i, l := range ls {
		if l.Calendar == nil || l.Period == l.Calendar.Unit.Nominal() {
			continue
		}
		if out == nil {
			out = append([]Limit(nil), ls...)
		}
		out[i].Period = l.Calendar.Unit.Nominal()
	}
	if out == nil {
		return ls
	}
	return out
}

// longestWindow bounds the windows of the calendar limits of ls (0 when there are none): a
// reply about one reaches no further. Horizon leaves them out, as their keys need no TTL to
// cover them.
func longestWindow(ls []Limit) time.Duration {
	var w time.Duration
	for _, l := range ls {
		if l.Calendar != nil {
			w = max(w, l.Calendar.Unit.Longest())
		}
	}
	return w
}

// checkCalendars refuses calendar limits where they cannot be run: with an algorithm other
// than FixedWindow, or without a time zone.
func checkCalendars(c Spec) FieldErrors {
	var errs FieldErrors
	for i, l := range c.Limits {
		if l.Calendar == nil {
			continue
		}
		field := fmt.Sprintf("limits[%d].calendar", i)
		switch {
		case !c.Algorithm.desc().calendar:
			errs.add(field, "calendar windows are for FixedWindow, not %s", c.Algorithm)
		case l.Calendar.Unit.Check() != nil:
			errs.add(field+".unit", "%v", l.Calendar.Unit.Check())
		case l.Calendar.Location == nil:
			errs.add(field+".timeZone", "no time zone (unknown to this binary's time zone database?)")
		}
	}
	return errs
}
