package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// clockedRedis is a real redis-server on a controlled clock.
func clockedRedis(t *testing.T) (*redistest.Clock, *redistest.Server) {
	t.Helper()
	redistest.RequireRedis(t)
	clock := redistest.NewClock(t)
	return clock, redistest.StartServer(t, redistest.WithClock(clock))
}

// clockedServer is a real redis-server on a controlled clock, and a limiter on it whose own
// clock is the real one (months away from the server's, as a sidecar's clock is a little
// away from Redis's): the limiter must take the windows from the server's time.
func clockedServer(t *testing.T) (*redistest.Clock, *Limiter) {
	t.Helper()
	clock, srv := clockedRedis(t)
	return clock, newLimiter(t, srv.Client(), Options{})
}

func calLimit(t *testing.T, name string, n int64, unit calendar.Unit, zone string) Limit {
	t.Helper()
	c, err := calendar.New(unit, zone)
	if err != nil {
		t.Fatal(err)
	}
	return Limit{Name: name, Requests: n, Calendar: &c}
}

func local(t *testing.T, zone, s string) time.Time {
	t.Helper()
	loc, err := calendar.LoadZone(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04:05.000", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// near fails unless got is want, within the time the checks themselves take.
func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got > want+time.Millisecond || got < want-2*time.Second {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// TestCalendarMonthAdmitsExactly: 3 per calendar month admits exactly 3 between two month
// boundaries, in two zones (one just past a DST change), whether the checks come at the
// start, in the middle or in the last second of the month; every denial's Retry-After and
// every reset is the true local month end, and the next month starts with 3 again.
func TestCalendarMonthAdmitsExactly(t *testing.T) {
	clock, l := clockedServer(t)
	for _, zone := range []string{"Europe/Berlin", "America/New_York"} {
		t.Run(zone, func(t *testing.T) {
			p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 3, calendar.Month, zone))
			end := local(t, zone, "2027-04-01 00:00:00.000")
			admitted := 0
			for _, at := range []string{"2027-03-01 00:00:00.000", "2027-03-14 02:30:00.000", "2027-03-28 02:30:00.000", "2027-03-31 23:59:58.000"} {
				now := local(t, zone, at)
				clock.Set(t, now)
				for range 2 {
					d := mustCheck(t, l, p, Request{Identity: "caller"})
					if d.Allowed {
						admitted++
						near(t, at+" reset", d.ResetAfter, end.Sub(now))
						continue
					}
					near(t, at+" retry-after", d.RetryAfter, end.Sub(now))
				}
			}
			if admitted != 3 {
				t.Fatalf("March admitted %d, want exactly 3", admitted)
			}
			clock.Set(t, end)
			admitted = 0
			for range 5 {
				if d := mustCheck(t, l, p, Request{Identity: "caller"}); d.Allowed {
					admitted++
					near(t, "April reset", d.ResetAfter, local(t, zone, "2027-05-01 00:00:00.000").Sub(end))
				}
			}
			if admitted != 3 {
				t.Fatalf("April admitted %d, want exactly 3", admitted)
			}
		})
	}
}

// TestCalendarDayAcrossDST: a calendar day is 23 or 25 hours on the days DST starts and
// ends, in two zones; a daily quota used up at 00:00:01 resets at the next local midnight,
// and the denial says so.
func TestCalendarDayAcrossDST(t *testing.T) {
	clock, l := clockedServer(t)
	for _, c := range []struct {
		zone, day string
		hours     time.Duration
	}{
		{"Europe/Berlin", "2027-03-28", 23}, {"Europe/Berlin", "2027-10-31", 25},
		{"America/New_York", "2027-03-14", 23}, {"America/New_York", "2027-11-07", 25},
	} {
		t.Run(c.zone+"/"+c.day, func(t *testing.T) {
			p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "day", 2, calendar.Day, c.zone))
			start := local(t, c.zone, c.day+" 00:00:00.000")
			now := start.Add(time.Second)
			clock.Set(t, now)
			for i := range 3 {
				d := mustCheck(t, l, p, Request{Identity: "caller"})
				if d.Allowed != (i < 2) {
					t.Fatalf("check %d: allowed %v", i, d.Allowed)
				}
				if !d.Allowed {
					near(t, "retry-after", d.RetryAfter, c.hours*time.Hour-time.Second)
				}
			}
			clock.Set(t, start.Add(c.hours*time.Hour-time.Second))
			if d := mustCheck(t, l, p, Request{Identity: "caller"}); d.Allowed {
				t.Fatalf("a second before the %dh day ends: admitted", c.hours)
			}
			clock.Set(t, start.Add(c.hours*time.Hour))
			if d := mustCheck(t, l, p, Request{Identity: "caller"}); !d.Allowed {
				t.Fatalf("at the next local midnight: denied (%+v)", d)
			}
		})
	}
}

// TestCalendarSidecarClockAhead: a limiter whose clock runs ahead of Redis's into the next
// month (and one behind it) still counts in the server's month: the script refuses the
// window the limiter guessed, and the limiter asks again with the server's.
func TestCalendarSidecarClockAhead(t *testing.T) {
	clock, srv := clockedRedis(t)
	zone := "Europe/Berlin"
	server := local(t, zone, "2027-03-31 23:59:30.000")
	for _, skew := range []time.Duration{time.Minute, -40 * 24 * time.Hour} {
		clock.Set(t, server)
		var own atomic.Int64
		own.Store(server.Add(skew).UnixNano())
		l := newLimiter(t, srv.Client(), Options{Now: func() time.Time { return time.Unix(0, own.Load()) }})
		p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 2, calendar.Month, zone))
		for i := range 3 {
			d := mustCheck(t, l, p, Request{Identity: "caller"})
			if d.Allowed != (i < 2) || d.Source != SourceRedis {
				t.Fatalf("skew %s, check %d: %+v", skew, i, d)
			}
			if d.Allowed {
				near(t, "reset", d.ResetAfter, 30*time.Second)
			}
		}
		clock.Set(t, local(t, zone, "2027-04-01 00:00:00.000"))
		if d := mustCheck(t, l, p, Request{Identity: "caller"}); !d.Allowed {
			t.Fatalf("skew %s: April denied: %+v", skew, d)
		}
	}
}

// TestCalendarMultiLimit runs the general path (several limits, an idempotency key): a
// daily and a monthly calendar limit and a period limit, all-or-nothing, with the reset of
// the limit that decides.
func TestCalendarMultiLimit(t *testing.T) {
	clock, l := clockedServer(t)
	zone := "America/New_York"
	p := newPolicy(t, FixedWindow, FailClosed,
		calLimit(t, "day", 2, calendar.Day, zone), calLimit(t, "month", 3, calendar.Month, zone),
		Limit{Name: "hour", Requests: 100, Period: time.Hour})
	day1 := local(t, zone, "2027-11-29 12:00:00.000")
	clock.Set(t, day1)
	for i := range 3 {
		d := mustCheck(t, l, p, Request{Identity: "c", RequestID: fmt.Sprint("r", i)})
		if d.Allowed != (i < 2) {
			t.Fatalf("day 1 check %d: %+v", i, d)
		}
		if !d.Allowed && (d.DeniedBy != "day" || d.RetryAfter > 12*time.Hour) {
			t.Fatalf("day 1 denial: %+v", d)
		}
	}
	clock.Set(t, day1.Add(24*time.Hour))
	for i := range 2 {
		d := mustCheck(t, l, p, Request{Identity: "c", RequestID: fmt.Sprint("s", i)})
		if d.Allowed != (i < 1) {
			t.Fatalf("day 2 check %d: %+v", i, d)
		}
		if !d.Allowed {
			near(t, "month retry-after", d.RetryAfter, local(t, zone, "2027-12-01 00:00:00.000").Sub(day1.Add(24*time.Hour)))
			if d.DeniedBy != "month" {
				t.Fatalf("day 2 denied by %q, want month", d.DeniedBy)
			}
		}
	}
}

// TestCalendarKeysOutliveTheirWindow: a calendar key's PX reaches past its window's end
// whatever the policy's TTL, so a monthly count is never forgotten mid-month.
func TestCalendarKeysOutliveTheirWindow(t *testing.T) {
	clock, l := clockedServer(t)
	zone := "Europe/Berlin"
	p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 3, calendar.Month, zone))
	now := local(t, zone, "2027-02-01 00:00:05.000")
	clock.Set(t, now)
	mustCheck(t, l, p, Request{Identity: "k"})
	pttl, err := l.rdb.PTTL(context.Background(), p.Keys("k", "")[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := local(t, zone, "2027-03-01 00:00:00.000").Sub(now); pttl < left {
		t.Fatalf("PTTL %s, but the window has %s left", pttl, left)
	}
}

// TestCalendarEditsKeepCounts: turning a period limit into a calendar one, or a day into a
// month, keeps what was counted in the window still current: an edit never hands out a
// fresh quota.
func TestCalendarEditsKeepCounts(t *testing.T) {
	clock, l := clockedServer(t)
	zone := "Europe/Berlin"
	clock.Set(t, local(t, zone, "2027-06-15 10:00:00.000"))
	named := func(l Limit) *Policy {
		p, err := NewPolicy(Spec{Namespace: "test", Name: "edited", Algorithm: FixedWindow, Limits: []Limit{l},
			StateKey: testTemplate, TTL: 48 * time.Hour, FailureMode: FailClosed})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	day := calLimit(t, "q", 3, calendar.Day, zone)
	month := calLimit(t, "q", 3, calendar.Month, zone)
	period := Limit{Name: "q", Requests: 3, Period: 24 * time.Hour}
	for _, edit := range [][2]Limit{{period, day}, {day, month}, {month, period}} {
		before, after := named(edit[0]), named(edit[1])
		for range 2 {
			mustCheck(t, l, before, Request{Identity: "e"})
		}
		got := 0
		for range 3 {
			if mustCheck(t, l, after, Request{Identity: "e"}).Allowed {
				got++
			}
		}
		if got != 1 {
			t.Errorf("%v -> %v: admitted %d after the edit, want 1", edit[0].Calendar, edit[1].Calendar, got)
		}
		l.rdb.Del(context.Background(), before.Keys("e", "")...)
	}
}

// TestCalendarConcurrentBoundary: 64 callers hammer 100 per calendar month while the server
// clock crosses the month end; each month admits exactly 100 (told apart by the reset each
// admission reports), never more.
func TestCalendarConcurrentBoundary(t *testing.T) {
	clock, l := clockedServer(t)
	zone := "America/New_York"
	p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 100, calendar.Month, zone))
	clock.Set(t, local(t, zone, "2027-11-30 23:59:50.000"))
	var wg sync.WaitGroup
	var march, april atomic.Int64
	var switched atomic.Bool
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000 && (i < 10 || !switched.Load() || april.Load() < 100); i++ {
				d := l.Check(context.Background(), p, Request{Identity: "hot"})
				switch {
				case d.Source != SourceRedis:
					t.Errorf("decided without Redis: %+v", d)
				case d.Allowed && d.ResetAfter < time.Hour:
					march.Add(1)
				case d.Allowed:
					april.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	// The clock crosses the month end while the callers are still at it, once November is
	// used up (or after 5 s, on a machine too slow to get there).
	for deadline := time.Now().Add(5 * time.Second); march.Load() < 100 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	clock.Set(t, local(t, zone, "2027-12-01 00:00:00.000"))
	switched.Store(true)
	wg.Wait()
	if march.Load() != 100 || april.Load() != 100 {
		t.Fatalf("admitted %d in November and %d in December, want exactly 100 each", march.Load(), april.Load())
	}
}

// TestCalendarRefusals: NewPolicy names the field of a calendar limit it cannot run.
func TestCalendarRefusals(t *testing.T) {
	c, _ := calendar.New(calendar.Day, "UTC")
	for _, tc := range []struct {
		spec  Spec
		field string
	}{
		{Spec{Algorithm: TokenBucket, Limits: []Limit{{Name: "d", Requests: 3, Calendar: &c}}}, "limits[0].calendar"},
		{Spec{Algorithm: FixedWindow, Limits: []Limit{{Name: "d", Requests: 3, Calendar: &calendar.Calendar{Unit: calendar.Day}}}}, "limits[0].calendar.timeZone"},
	} {
		tc.spec.Namespace, tc.spec.Name, tc.spec.StateKey, tc.spec.TTL = "n", "p", testTemplate, time.Hour
		_, err := NewPolicy(tc.spec)
		var fe FieldErrors
		if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != tc.field {
			t.Errorf("%+v: got %v, want one error on %s", tc.spec.Limits[0], err, tc.field)
		}
	}
}

// TestCalendarShardsAndFunctions: a calendar month spread over 2 shards admits exactly its
// quota and reports the true month end; a calendar policy called as a Redis function (FCALL,
// as per-namespace users' sidecars call) decides as with EVALSHA, across the month end.
func TestCalendarShardsAndFunctions(t *testing.T) {
	clock, srv := clockedRedis(t)
	rdb := srv.Client()
	loadLibraries(t, rdb)
	l := newLimiter(t, rdb, Options{Pipelining: true})
	zone := "Europe/Berlin"
	end := local(t, zone, "2027-11-01 00:00:00.000") // a month of 31 days and an hour
	now := end.Add(-time.Hour)
	clock.Set(t, now)

	sharded := shardedPolicy(t, FixedWindow, 2, false, calLimit(t, "month", 30, calendar.Month, zone))
	admitted := 0
	for range 40 {
		if d := mustCheck(t, l, sharded, Request{Identity: "all"}); d.Allowed {
			admitted++
			near(t, "sharded reset", d.ResetAfter, time.Hour)
		}
	}
	if admitted != 30 {
		t.Fatalf("2 shards admitted %d of a month of 30", admitted)
	}

	byScript := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 2, calendar.Month, zone), perHour("hour", 5))
	byFunction := functionsPolicy(t, byScript)
	for i, at := range []time.Time{now, now, now, end, end, end} {
		clock.Set(t, at)
		a, b := mustCheck(t, l, byScript, Request{Identity: "c"}), mustCheck(t, l, byFunction, Request{Identity: "c"})
		if a.Allowed != b.Allowed || a.Remaining != b.Remaining || a.LimitName != b.LimitName || b.Allowed != (i%3 < 2) {
			t.Errorf("check %d: EVALSHA %+v, FCALL %+v", i, a, b)
		}
	}
}

// TestCalendarLeasesAcrossMonthEnd: two limiters serve one hot identity of 200 per calendar
// month from leases while the server clock crosses the month end. Each month admits at most
// 200, leases serve both, and no unit leased in November is spent after November ends
// (by the server's clock, mapped to the limiters' own).
func TestCalendarLeasesAcrossMonthEnd(t *testing.T) {
	clock, srv := clockedRedis(t)
	zone := "America/New_York"
	end := local(t, zone, "2027-12-01 00:00:00.000")
	lead := 1500 * time.Millisecond
	clock.Set(t, end.Add(-lead))
	boundary := time.Now().Add(lead) // the month end on the limiters' clock
	p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 200, calendar.Month, zone))
	c := p.Spec
	c.Leases = true
	p, err := NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	var tally monthTally
	var wg sync.WaitGroup
	for i := range 2 {
		l := newLimiter(t, srv.Client(), Options{Pipelining: i == 1, Leases: LeaseOptions{HotRate: 1, Span: 200 * time.Millisecond}})
		for range 16 {
			wg.Go(func() {
				for stop := time.Now().Add(4 * time.Second); time.Now().Before(stop) && tally.dec.Load() < 200; {
					if d := l.Check(context.Background(), p, Request{Identity: "hot"}); !tally.record(d, boundary) {
						t.Errorf("decided without Redis: %+v", d)
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	nov, dec := tally.nov.Load(), tally.dec.Load()
	t.Logf("November %d, December %d, %d from leases", nov, dec, tally.leased.Load())
	if nov > 200 || dec > 200 || dec == 0 {
		t.Fatalf("admitted %d in November and %d in December of 200 a month", nov, dec)
	}
	if tally.leased.Load() == 0 {
		t.Fatal("no admission came from a lease")
	}
	if late := tally.late.Load(); late > 0 {
		t.Fatalf("%d November units spent from leases after November ended", late)
	}
}

// monthTally counts admissions by the month they were counted in (told apart by the reset
// they report: under an hour is the old month), and old-month units spent from a lease
// after the month ended on the limiters' clock.
type monthTally struct {
	nov, dec, leased, late atomic.Int64
}

// record counts d; false when Redis was not asked.
func (m *monthTally) record(d Decision, boundary time.Time) bool {
	if d.WithoutRedis() {
		return false
	}
	if d.Source == SourceLease {
		m.leased.Add(1)
	}
	switch {
	case !d.Allowed:
	case d.ResetAfter < time.Hour:
		m.nov.Add(1)
		if d.Source == SourceLease && time.Now().After(boundary) {
			m.late.Add(1)
		}
	default:
		m.dec.Add(1)
	}
	return true
}

// TestCalendarDenyCacheKeepsTheBoundary: a denial of a calendar limit answered from the deny
// cache still says how long until the window ends (the policy's reply horizon covers its
// windows), not the 1 ms its TTL horizon would allow.
func TestCalendarDenyCacheKeepsTheBoundary(t *testing.T) {
	clock, srv := clockedRedis(t)
	l := newLimiter(t, srv.Client(), Options{DenyCacheSize: 100})
	zone := "Europe/Berlin"
	end := local(t, zone, "2027-03-01 00:00:00.000")
	clock.Set(t, end.Add(-10*24*time.Hour))
	p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 1, calendar.Month, zone))
	mustCheck(t, l, p, Request{Identity: "c"})
	for i, want := range []Source{SourceRedis, SourceDenyCache} {
		d := l.Check(context.Background(), p, Request{Identity: "c"})
		if d.Allowed || d.Source != want {
			t.Fatalf("denial %d: %+v, want a denial from %s", i, d, want)
		}
		near(t, fmt.Sprint("denial ", i, " retry-after"), d.RetryAfter, 10*24*time.Hour)
	}
}

// TestCalendarOnTheCluster: on a 3-primary Redis Cluster whose nodes share a controlled
// clock, a month of 30 spread over 3 shards (one per primary) and a per-caller month of 3
// each admit exactly their quota across the month end, every call on one slot.
func TestCalendarOnTheCluster(t *testing.T) {
	redistest.RequireRedis(t)
	clock := redistest.NewClock(t)
	cl := redistest.StartCluster(t, 3, redistest.WithNodeOptions(redistest.WithClock(clock)))
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	l := newLimiter(t, rdb, Options{Pipelining: true})
	zone := "Asia/Tokyo"
	end := local(t, zone, "2028-03-01 00:00:00.000") // after a leap day
	global := shardedPolicy(t, FixedWindow, 3, false, calLimit(t, "month", 30, calendar.Month, zone))
	perCaller := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 3, calendar.Month, zone))
	for _, at := range []time.Time{end.Add(-time.Minute), end} {
		clock.Set(t, at)
		var all, callers int
		for i := range 40 {
			if d := mustCheck(t, l, global, Request{Identity: "all"}); d.Allowed {
				all++
			}
			if d := mustCheck(t, l, perCaller, Request{Identity: fmt.Sprint("caller-", i%10)}); d.Allowed {
				callers++
			}
		}
		if all != 30 || callers != 30 {
			t.Fatalf("at %s: the shared month admitted %d of 30, ten callers %d of 3 each", at, all, callers)
		}
	}
}

// TestCalendarWindowRefused: a caller (any tenant may FCALL the script with arguments of its
// own) that sends a window not "start:end" gets an ERR reply, and nothing is written.
func TestCalendarWindowRefused(t *testing.T) {
	_, rdb := standalone(t)
	p := newPolicy(t, FixedWindow, FailClosed, calLimit(t, "month", 3, calendar.Month, "UTC"), perHour("hour", 5))
	for _, bad := range []string{"1:2:3", "-5:10", "abc", "1:", ":9"} {
		for _, single := range []bool{true, false} {
			args := p.Args(Request{Identity: "x"})
			keys := p.Keys("x", "")
			if single {
				args, keys = append(append([]any(nil), args[:3]...), args[3], bad), keys[:1]
			} else {
				args = append([]any(nil), args...)
				args[4] = bad
			}
			_, err := evalOne(context.Background(), rdb, p.script, keys, args)
			if err == nil || !strings.Contains(err.Error(), "calendar window") {
				t.Errorf("window %q (single %v): %v, want a refusal", bad, single, err)
			}
			if n, _ := rdb.Exists(context.Background(), keys...).Result(); n != 0 {
				t.Errorf("window %q (single %v): %d keys written", bad, single, n)
			}
		}
	}
}
