package limiter

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// leasePolicy is newPolicy with leases on.
func leasePolicy(t testing.TB, alg Algorithm, limits ...Limit) *Policy {
	t.Helper()
	p := newPolicy(t, alg, FailClosed, limits...)
	c := p.Spec
	c.Leases = true
	q, err := NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return q
}

// leaseLog records the lease calls of a limiter (Options.Leases.OnLease).
type leaseLog struct {
	mu                      sync.Mutex
	calls, granted, largest int64
	returned, refused       int64
}

func (g *leaseLog) record(_ *Policy, granted, returned int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	g.granted += granted
	g.largest = max(g.largest, granted)
	g.returned += returned
	if granted == 0 {
		g.refused++
	}
}

// leaseLimiters is n limiters (two sidecars, say) on separate clients with leases logged.
func leaseLimiters(t testing.TB, srv *redistest.Server, n int, log *leaseLog) []*Limiter {
	t.Helper()
	out := make([]*Limiter, n)
	for i := range out {
		c := srv.Client()
		t.Cleanup(func() { _ = c.Close() })
		out[i] = newLimiter(t, c, Options{Pipelining: i%2 == 1, Leases: LeaseOptions{OnLease: log.record}})
	}
	return out
}

// TestLeasesNeverOverAdmit hammers one identity with a limit of L per 1000 hours (nothing
// refills, no window ends) from 64 callers over two limiters with leases on, 2L checks in
// all, for every algorithm: the admitted count never exceeds L (over-admission exactly 0),
// misses L by no more than the units two leases can hold (the under-admission bound), and
// most decisions come from leases, not Redis.
func TestLeasesNeverOverAdmit(t *testing.T) {
	const limit = 1000
	srv, _ := standalone(t)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			var log leaseLog
			p := leasePolicy(t, alg, Limit{Name: "long", Requests: limit, Period: 1000 * time.Hour})
			got, fromLease, fromRedis := hammerLeased(t, leaseLimiters(t, srv, 2, &log), p, 64, 2*limit, func(int, int) int64 { return 1 })
			bound := 2 * log.largest
			t.Logf("%s: admitted %d of %d (under by %d, bound 2 * largest lease = %d); %d from leases, %d from Redis; %d lease calls, %d refused",
				alg, got, limit, limit-got, bound, fromLease, fromRedis, log.calls, log.refused)
			if got > limit {
				t.Fatalf("over-admission: %d admitted, limit %d", got, limit)
			}
			if limit-got > bound {
				t.Errorf("under-admission %d exceeds the bound %d", limit-got, bound)
			}
			if fromLease < limit/2 {
				t.Errorf("only %d of %d admissions came from leases", fromLease, got)
			}
		})
	}
}

// hammerLeased releases callers goroutines together over lims (goroutine g on lims[g%n]),
// checks checks in all, request i of goroutine g costing cost(g, i), and returns the cost
// admitted and the decisions from leases and from Redis.
func hammerLeased(t *testing.T, lims []*Limiter, p *Policy, callers, checks int, cost func(g, i int) int64) (admitted, fromLease, fromRedis int64) {
	t.Helper()
	var adm, leased, byRedis atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range callers {
		wg.Go(func() {
			<-start
			for i := range checks / callers {
				c := cost(g, i)
				d := lims[g%len(lims)].Check(context.Background(), p, Request{Identity: "hot", Cost: c})
				if d.WithoutRedis() {
					t.Errorf("decided without Redis: %v", d.Err)
					return
				}
				if d.Source == SourceLease {
					leased.Add(1)
				} else {
					byRedis.Add(1)
				}
				if d.Allowed {
					adm.Add(c)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return adm.Load(), leased.Load(), byRedis.Load()
}

// hotUp makes identity hot at l (HotRate is 50/s: a burst of checks within 100ms), and
// returns how many of those checks were admitted.
func hotUp(t testing.TB, l *Limiter, p *Policy, identity string, n int) int64 {
	t.Helper()
	var ok int64
	for range n {
		d := l.Check(context.Background(), p, Request{Identity: identity})
		if d.WithoutRedis() {
			t.Fatalf("decided without Redis: %v", d.Err)
		}
		if d.Allowed {
			ok++
		}
	}
	return ok
}

// leasedUp is one limiter with leases and a policy of requests per 1000 hours whose
// identity was made hot by n quick checks; it fails the test unless a lease was taken.
func leasedUp(t *testing.T, srv *redistest.Server, alg Algorithm, requests int64, identity string, n int) (*Limiter, *Policy, *leaseLog, int64) {
	t.Helper()
	log := &leaseLog{}
	l := leaseLimiters(t, srv, 1, log)[0]
	p := leasePolicy(t, alg, Limit{Name: "long", Requests: requests, Period: 1000 * time.Hour})
	admitted := hotUp(t, l, p, identity, n)
	if log.granted == 0 {
		t.Fatalf("no lease taken after %d quick checks", n)
	}
	return l, p, log, admitted
}

// redisRemaining asks Redis, through a limiter without leases, what identity has left (one
// unit is spent asking).
func redisRemaining(t testing.TB, rdb redis.UniversalClient, p *Policy, identity string) int64 {
	t.Helper()
	c := p.Spec
	c.Leases = false
	q, err := NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	return mustCheck(t, newLimiter(t, rdb, Options{}), q, Request{Identity: identity}).Remaining
}

// TestReturnedLeaseLeavesExactCount takes leases for a hot identity, spends part, returns
// the rest and checks Redis: for the windows exactly the admitted units stay counted; for
// TokenBucket and GCRA no more than were admitted (cells that started unspent are gone
// with the time they stood for, never more).
func TestReturnedLeaseLeavesExactCount(t *testing.T) {
	srv, rdb := standalone(t)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			l, p, log, admitted := leasedUp(t, srv, alg, 1000, "ret", 40)
			if err := l.ReturnLeases(context.Background()); err != nil {
				t.Fatalf("ReturnLeases: %v", err)
			}
			rem := redisRemaining(t, rdb, p, "ret")
			used := 1000 - rem - 1
			t.Logf("admitted %d, Redis counts %d used, %d leased in %d calls, %d returned", admitted, used, log.granted, log.calls, log.returned)
			if used < admitted {
				t.Fatalf("Redis counts %d used, fewer than the %d admitted: a return revived spent units", used, admitted)
			}
			if alg == FixedWindow || alg == SlidingWindow {
				if used != admitted {
					t.Errorf("Redis counts %d used after the return, want exactly the %d admitted", used, admitted)
				}
			}
		})
	}
}

// TestReturnAfterDataLossRevivesNothing: a lease is taken, Redis loses everything (FLUSHALL,
// as a restart without persistence), other callers spend; returning the old lease then
// must not give back units that the new state never held.
func TestReturnAfterDataLossRevivesNothing(t *testing.T) {
	srv, rdb := standalone(t)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			l, p, log, _ := leasedUp(t, srv, alg, 100, "lost", 12)
			if err := rdb.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			before := redisRemaining(t, rdb, p, "lost")
			if err := l.ReturnLeases(context.Background()); err != nil {
				t.Fatalf("ReturnLeases: %v", err)
			}
			after := redisRemaining(t, rdb, p, "lost")
			if after != before-1 {
				t.Errorf("remaining %d after returning a lease lost with the data, want %d: the return revived units", after, before-1)
			}
			if log.returned != 0 {
				t.Errorf("%d units returned after the data loss, want 0", log.returned)
			}
		})
	}
}

// TestLeaseReturnNeverRevivesEndedWindow takes a lease in one fixed window and returns it
// in the next: the next window's count must not drop.
func TestLeaseReturnNeverRevivesEndedWindow(t *testing.T) {
	srv, rdb := standalone(t)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			var log leaseLog
			l := leaseLimiters(t, srv, 1, &log)[0]
			const period = 400 * time.Millisecond
			p := leasePolicy(t, alg, Limit{Name: "short", Requests: 1000, Period: period})
			waitWindowStart(t, rdb, period)
			hotUp(t, l, p, "edge", 12)
			if log.granted == 0 {
				t.Fatal("no lease taken")
			}
			waitWindowStart(t, rdb, period)
			hotUp(t, newLimiter(t, rdb, Options{}), p, "edge", 5) // counted in the new window
			t0 := time.Now()
			before := redisRemaining(t, rdb, p, "edge")
			if err := l.ReturnLeases(context.Background()); err != nil {
				t.Fatal(err)
			}
			after := redisRemaining(t, rdb, p, "edge")
			// A sliding window's remaining also rises as the previous window's weight decays:
			// at most that window's count (the lease and the 12 checks) × the time elapsed
			// between the two reads / period. A revived lease would add back its unspent units.
			var decay int64
			if alg == SlidingWindow {
				decay = int64(math.Ceil(float64(log.granted+12) * float64(time.Since(t0)) / float64(period)))
			}
			if after > before-1+decay {
				t.Errorf("remaining rose from %d to %d (time alone allows %d): a lease of an ended window was returned into the next", before, after, decay)
			}
		})
	}
}

// waitWindowStart sleeps until just after a window of period begins on the Redis clock.
func waitWindowStart(t testing.TB, rdb redis.UniversalClient, period time.Duration) {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(period - time.Duration(now.UnixNano())%period + 5*time.Millisecond)
}

// TestEditedPolicyDropsLeases: leases taken under a policy are not spent under its edited
// successor (a new *Policy, as every snapshot change compiles). The limit is lowered below
// what is already counted while the old lease still holds units: the new policy admits
// nothing, where spending the old lease would admit its units beyond the new limit.
func TestEditedPolicyDropsLeases(t *testing.T) {
	srv, _ := standalone(t)
	var log leaseLog
	l := leaseLimiters(t, srv, 1, &log)[0]
	old := leasePolicy(t, FixedWindow, Limit{Name: "long", Requests: 1000, Period: 1000 * time.Hour})
	before := hotUp(t, l, old, "edited", 20)
	e := l.leases.entry(old, "edited")
	e.mu.Lock()
	var held int64
	if e.cur != nil {
		held = e.cur.left(time.Now())
	}
	e.mu.Unlock()
	if held < 1 {
		t.Fatalf("want a lease still holding units: %d leased, %d admitted, none held", log.granted, before)
	}
	c := old.Spec
	c.Limits = []Limit{{Name: "long", Requests: before / 2, Period: 1000 * time.Hour}}
	lowered, err := NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	if after := hotUp(t, l, lowered, "edited", 50); after != 0 {
		t.Errorf("admitted %d under a limit of %d with %d already counted: the old policy's lease was spent under the new one", after, before/2, before)
	}
}

// TestColdAndIdempotentChecksAskRedis: an identity below HotRate is never leased, and an
// idempotent check asks Redis even when its identity is hot.
func TestColdAndIdempotentChecksAskRedis(t *testing.T) {
	srv, _ := standalone(t)
	var log leaseLog
	l := leaseLimiters(t, srv, 1, &log)[0]
	p := leasePolicy(t, FixedWindow, Limit{Name: "long", Requests: 1000, Period: 1000 * time.Hour})
	for range 4 {
		mustCheck(t, l, p, Request{Identity: "cold"})
		time.Sleep(30 * time.Millisecond) // about 33/s, below the 50/s HotRate
	}
	if log.calls != 0 {
		t.Fatalf("%d lease calls for a cold identity", log.calls)
	}
	hotUp(t, l, p, "hot", 20)
	if log.granted == 0 {
		t.Fatal("hot identity not leased")
	}
	for i := range 5 {
		d := l.Check(context.Background(), p, Request{Identity: "hot", RequestID: string(rune('a' + i))})
		if d.Source != SourceRedis {
			t.Errorf("idempotent check answered by %s, want Redis", d.Source)
		}
	}
}

// TestLeaseTake checks the local spending rules: window units until the deadline; cells
// only before they start, skipping the past ones.
func TestLeaseTake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := &lease{units: 3, base: t0.Add(time.Second)}
	for i := range 3 {
		if !w.take(1, t0) {
			t.Fatalf("window unit %d refused before the deadline", i)
		}
	}
	if w.take(1, t0) {
		t.Fatal("a fourth unit of a 3-unit lease was spent")
	}
	late := &lease{units: 3, base: t0}
	if late.take(1, t0.Add(time.Millisecond)) {
		t.Fatal("window unit spent after the window ended")
	}
	cells := &lease{units: 10, base: t0, step: 10 * time.Millisecond}
	if !cells.take(1, t0.Add(25*time.Millisecond)) || cells.next != 4 {
		t.Fatalf("at 25ms the first spendable cell is 3 (starts at 30ms): next = %d", cells.next)
	}
	if !cells.take(2, t0.Add(30*time.Millisecond)) || cells.next != 6 {
		t.Fatalf("two cells from 4 at 30ms: next = %d, want 6", cells.next)
	}
	if cells.take(1, t0.Add(91*time.Millisecond)) {
		t.Fatal("spent a cell after the last one started")
	}
}

// TestLeasedCellsNeverBeatTheBucket is the scenario a window-style lease would over-admit:
// one limiter leases a TokenBucket's (or GCRA's) whole burst of 10 (one token per 100ms),
// time passes, the bucket refills in Redis and another limiter drains it; then the leased
// units are spent at once. Each leased unit stands for the time slot it was debited from
// and may be spent only before it starts, so the units past by then are gone: the burst at
// that moment, leased plus fresh, stays within 10.
func TestLeasedCellsNeverBeatTheBucket(t *testing.T) {
	srv, rdb := standalone(t)
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			var log leaseLog
			c := srv.Client()
			t.Cleanup(func() { _ = c.Close() })
			a := newLimiter(t, c, Options{Leases: LeaseOptions{HotRate: 1, Span: time.Second, Share: 1, OnLease: log.record}})
			p := leasePolicy(t, alg, Limit{Name: "tenth", Requests: 10, Period: time.Second})
			if d := a.Check(context.Background(), p, Request{Identity: "cells"}); d.Source != SourceLease {
				t.Fatalf("first check from %s, want a lease (HotRate 1)", d.Source)
			}
			if log.granted != 10 {
				t.Fatalf("leased %d, want the whole burst of 10", log.granted)
			}
			time.Sleep(500 * time.Millisecond)
			fresh := hotUp(t, newLimiter(t, rdb, Options{}), p, "cells", 12)
			var leasedNow int64
			for range 12 {
				if d := a.Check(context.Background(), p, Request{Identity: "cells"}); d.Allowed && d.Source == SourceLease {
					leasedNow++
				}
			}
			t.Logf("after 500ms: %d fresh from Redis, %d from the lease", fresh, leasedNow)
			if fresh+leasedNow > 10 {
				t.Errorf("%d admitted at one moment with a burst of 10: leased units outlived their time slots", fresh+leasedNow)
			}
			if leasedNow == 0 {
				t.Errorf("no leased unit spendable 500ms into a lease of 10 one-per-100ms cells")
			}
		})
	}
}

// TestLeaseOutlivesRedisOnlyByItsUnits: a FailClosed policy's hot identity holds a lease when
// Redis dies. Its units were debited, so they are still admitted locally, and no more: past
// them every check is the failure mode's (here a denial), never a lease taken blind.
func TestLeaseOutlivesRedisOnlyByItsUnits(t *testing.T) {
	srv, _ := standalone(t)
	var log leaseLog
	l := newLimiter(t, srv.Client(), Options{Timeout: 200 * time.Millisecond,
		Leases: LeaseOptions{HotRate: 1, Span: time.Second, OnLease: log.record}})
	p := leasePolicy(t, FixedWindow, Limit{Name: "long", Requests: 1000, Period: 1000 * time.Hour})
	d := l.Check(context.Background(), p, Request{Identity: "down"})
	if d.Source != SourceLease {
		t.Fatalf("first check from %s, want a lease (HotRate 1)", d.Source)
	}
	if d.ResetAfter <= 0 || d.ResetAfter > 1000*time.Hour {
		t.Errorf("leased window decision resets after %s, want the end of its window", d.ResetAfter)
	}
	srv.Kill()
	var leased, failed int64
	for range 2 * int(log.granted) {
		d := l.Check(context.Background(), p, Request{Identity: "down"})
		switch {
		case d.Source == SourceLease && d.Allowed:
			leased++
		case d.Source == SourceFailClosed && !d.Allowed:
			failed++
		default:
			t.Fatalf("decision %+v with Redis down: want a leased admission or FailClosed", d)
		}
	}
	t.Logf("leased %d units; with Redis down %d more from the lease, then %d FailClosed", log.granted, leased, failed)
	if leased != log.granted-1 {
		t.Errorf("%d admitted from the lease with Redis down, want its %d remaining units", leased, log.granted-1)
	}
	if failed == 0 {
		t.Error("no FailClosed denial once the lease was spent")
	}
}

// TestLeasesWithCostNeverOverAdmit: requests of cost 1 to 3 spend that many leased units;
// from 32 callers over two limiters, the admitted cost never exceeds the limit.
func TestLeasesWithCostNeverOverAdmit(t *testing.T) {
	const limit = 600
	srv, _ := standalone(t)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			var log leaseLog
			p := leasePolicy(t, alg, Limit{Name: "long", Requests: limit, Period: 1000 * time.Hour})
			cost, leased, _ := hammerLeased(t, leaseLimiters(t, srv, 2, &log), p, 32, 2*limit,
				func(g, i int) int64 { return int64(1 + (g+i)%3) })
			t.Logf("%s: admitted cost %d of %d, %d decisions from leases", alg, cost, limit, leased)
			if cost > limit {
				t.Errorf("admitted cost %d over the limit %d", cost, limit)
			}
			if leased == 0 {
				t.Error("no decision came from a lease")
			}
		})
	}
}
