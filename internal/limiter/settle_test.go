package limiter

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// reserve is one admission of cost n for identity, recorded for its settlement when
// admitted (id).
type reserve struct {
	identity string
	cost     int64
	id       string
	ok       bool
}

// settlePolicy is newPolicy whose costs settle from the response (Spec.Settle).
func settlePolicy(t testing.TB, alg Algorithm, mode FailureMode, limits ...Limit) *Policy {
	t.Helper()
	c := newPolicy(t, alg, mode, limits...).Spec
	c.Settle = DefaultSettle
	p, err := NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

// mustReserve checks identity at cost n (the reservation), answered by Redis, and records
// the reservation when admitted, as the engine does.
func mustReserve(t testing.TB, l *Limiter, p *Policy, identity string, n int64) reserve {
	t.Helper()
	at := time.Now()
	d := mustCheck(t, l, p, Request{Identity: identity, Cost: n})
	r := reserve{identity: identity, cost: n, ok: d.Allowed}
	if d.Allowed {
		id, err := l.Reserve(context.Background(), p, identity, n, time.Since(at))
		if err != nil {
			t.Fatalf("reserve %d: %v", n, err)
		}
		r.id = id
	}
	return r
}

// mustSettle settles r at cost.
func mustSettle(t testing.TB, l *Limiter, p *Policy, r reserve, cost int64) Adjusted {
	t.Helper()
	out, err := l.Settle(context.Background(), p, Settlement{Identity: r.identity, Reservation: r.id, Cost: cost})
	if err != nil {
		t.Fatalf("settle %d of %d: %v", cost, r.cost, err)
	}
	if out.Reserved != r.cost {
		t.Fatalf("settle %d of %d: the reservation held %d", cost, r.cost, out.Reserved)
	}
	return out.Adjusted
}

// TestSettleExactEffect: for every algorithm, limits of 7 and 30 that cannot refill while
// the test runs. A reservation of 4 settled at 1 gives 3 back on each limit; one of 2
// settled at 5 takes 3 more; a settlement at the reserved cost changes nothing; a cost
// beyond what is left takes the limit past empty (windows count past it, so a later
// unreserve of less than the excess still admits nothing) or empties the bucket.
func TestSettleExactEffect(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		p := settlePolicy(t, alg, FailClosed, peekLimits()...)
		r := mustReserve(t, l, p, "alice", 4)
		wantChange(t, mustSettle(t, l, p, r, 1), "reserved 4, cost 1", change{6, 3}, change{29, 3})
		r = mustReserve(t, l, p, "alice", 2)
		wantChange(t, mustSettle(t, l, p, r, 5), "reserved 2, cost 5", change{1, -3}, change{24, -3})
		wantChange(t, mustSettle(t, l, p, mustReserve(t, l, p, "alice", 1), 1), "reserved 1, cost 1", change{0, 0}, change{23, 0})
		r = mustReserve(t, l, p, "bob", 5)
		third := mustReserve(t, l, p, "bob", 2)
		out := mustSettle(t, l, p, r, 12)
		if windows(alg) {
			wantChange(t, out, "reserved 5 (and 2), cost 12 (windows: 7 past the limit)", change{0, 0}, change{16, -7})
			// 7 past the small limit: giving back the other reservation's 2 still leaves 5 past.
			wantChange(t, mustSettle(t, l, p, third, 0), "unreserve 2 past the limit", change{0, 0}, change{18, 2})
			wantAdmitsOf(t, l, p, "bob", 5, 0, "5 past the small limit")
		} else {
			wantChange(t, out, "reserved 5 (and 2), cost 12 (buckets: emptied at most)", change{0, 0}, change{16, -7})
			wantChange(t, mustSettle(t, l, p, third, 0), "unreserve 2 of an empty bucket", change{2, 2}, change{18, 2})
			wantAdmitsOf(t, l, p, "bob", 5, 2, "2 given back to an emptied bucket")
		}
		wantAdmitsOf(t, l, p, "alice", 5, 0, "alice after her settlements (1 was reserved and settled at 1)")
	})
}

// wantAdmitsOf requires exactly want of n checks of cost 1 as identity to be admitted.
func wantAdmitsOf(t *testing.T, l *Limiter, p *Policy, identity string, n, want int, what string) {
	t.Helper()
	if got := admits(t, l, p, identity, n); got != want {
		t.Fatalf("%s: %d of %d admitted, want %d", what, got, n, want)
	}
}

// TestSettleOnceByItsReservation: a settlement retried at its cost is replayed (Redis as the
// first call left it); at another cost it is refused; and a reservation the limiter never
// recorded, one recorded for another caller and one settled before count for nothing:
// nothing a client states about a reservation changes a counter unless Redis recorded it.
func TestSettleOnceByItsReservation(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		ctx := context.Background()
		p := settlePolicy(t, alg, FailClosed, peekLimits()...)
		r := mustReserve(t, l, p, "carol", 6)
		s := Settlement{Identity: "carol", Reservation: r.id, Cost: 2}
		first, err := l.Settle(ctx, p, s)
		if err != nil || first.Replayed || first.Limits[0].Remaining != 5 || first.Reserved != 6 {
			t.Fatalf("settle 2 of 6: %+v, %v; want 5 remaining, 6 reserved", first, err)
		}
		for range 3 {
			again, err := l.Settle(ctx, p, s)
			if err != nil || !again.Replayed || again.Limits[0] != first.Limits[0] {
				t.Fatalf("retry: %+v, %v; want the first figures, replayed", again, err)
			}
		}
		s.Cost = 0
		if _, err := l.Settle(ctx, p, s); !errors.Is(err, ErrAdjustReused) {
			t.Fatalf("the reservation again at another cost: %v, want ErrAdjustReused", err)
		}
		other := mustReserve(t, l, p, "dan", 1)
		for _, bad := range []Settlement{
			{Identity: "carol", Reservation: NewID(), Cost: 0},         // never recorded
			{Identity: "carol", Reservation: other.id, Cost: 0},        // dan's
			{Identity: "mallory", Reservation: r.id, Cost: 0},          // carol's, named by another
			{Identity: "carol", Reservation: neighbour(r.id), Cost: 0}, // a neighbour of carol's
		} {
			if _, err := l.Settle(ctx, p, bad); !errors.Is(err, ErrNoReservation) {
				t.Fatalf("%+v: %v, want ErrNoReservation", bad, err)
			}
		}
		wantAdmitsOf(t, l, p, "carol", 8, 5, "after one settlement of 6 at 2, retried and refused")
		wantAdmitsOf(t, l, p, "dan", 8, 6, "dan, whose reservation of 1 stands")
	})
}

// neighbour is id with its first digit changed.
func neighbour(id string) string {
	if id[0] == '0' {
		return "1" + id[1:]
	}
	return "0" + id[1:]
}

// TestSettleRefusesBadShapes: each field out of range is refused naming it, before Redis;
// and a policy that settles nothing records and settles nothing.
func TestSettleRefusesBadShapes(t *testing.T) {
	for _, s := range []Settlement{
		{Cost: -1, Reservation: NewID()},
		{Cost: MaxAdjustAmount + 1, Reservation: NewID()},
		{Cost: 1},
		{Cost: 1, Reservation: "x"},
		{Cost: 1, Reservation: strings.ToUpper(NewID())},
		{Cost: 1, Reservation: NewID() + "0"},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v: accepted", s)
		}
	}
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	p := newPolicy(t, FixedWindow, FailClosed, peekLimits()...)
	if _, err := l.Reserve(context.Background(), p, "x", 1, 0); err == nil {
		t.Error("a reservation on a policy that settles nothing: accepted")
	}
	if _, err := l.Settle(context.Background(), p, Settlement{Identity: "x", Reservation: NewID()}); err == nil {
		t.Error("a settlement on a policy that settles nothing: accepted")
	}
}

// TestUnreserveOnlyInItsWindow: on windows of 1 s, a reservation of 3 taken in one window
// and settled at 0 in the next gives back nothing on the fixed window (that window ended;
// 2 used in this one stay used) and gives back the previous window's 3 on the sliding
// window. Without the window check a fixed window would free this window's 2.
func TestUnreserveOnlyInItsWindow(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			p := settlePolicy(t, alg, FailClosed, Limit{Name: "s", Requests: 3, Period: time.Second})
			waitWindowStart(t, rdb, time.Second)
			r := mustReserve(t, l, p, "dave", 3)
			waitWindowStart(t, rdb, time.Second) // the next window
			if alg == FixedWindow {
				wantAdmitsOf(t, l, p, "dave", 2, 2, "the next window")
				wantChange(t, mustSettle(t, l, p, r, 0), "unreserve of an ended window", change{1, 0})
				wantAdmitsOf(t, l, p, "dave", 3, 1, "after it")
				return
			}
			// The sliding window weighs the previous window's 3 at (1 - elapsed): giving them
			// back leaves the whole limit for this window.
			out := mustSettle(t, l, p, r, 0)
			if out.Limits[0].Remaining != 3 {
				t.Fatalf("unreserve of the previous window: %+v, want 3 remaining", out)
			}
			wantAdmitsOf(t, l, p, "dave", 4, 3, "after it")
		})
	}
}

// budgetRun is what one run of budgetUnder measured.
type budgetRun struct {
	// total is the cost of every admitted request.
	total int64
	// lateOvershoot is the cost beyond reservation of the admitted requests whose settlement
	// ended after the last admission began: those that could still raise the total once
	// nothing more was admitted.
	lateOvershoot int64
}

// budgetUnder runs 64 workers × 8 requests against a fresh budget of 1000 that cannot
// refill during the run: each reserves reserveCost, waits 0-2 ms, and if admitted settles
// at a cost drawn from costs (seeded per worker).
func budgetUnder(t *testing.T, l *Limiter, alg Algorithm, reserveCost int64, costs func(*rand.Rand) int64) budgetRun {
	const budget, workers, perWorker = 1000, 64, 8
	p := settlePolicy(t, alg, FailClosed, Limit{Name: "budget", Requests: budget, Period: 1000 * time.Hour})
	type done struct {
		admitStart, settleEnd time.Time
		over                  int64
	}
	var mu sync.Mutex
	var all []done
	var sum atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range perWorker {
				admitStart := time.Now()
				r := mustReserve(t, l, p, "team", reserveCost)
				cost := costs(rng)
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				if !r.ok {
					continue
				}
				sum.Add(cost)
				mustSettle(t, l, p, r, cost)
				mu.Lock()
				all = append(all, done{admitStart: admitStart, settleEnd: time.Now(), over: max(0, cost-reserveCost)})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var last time.Time
	for _, d := range all {
		if d.admitStart.After(last) {
			last = d.admitStart
		}
	}
	out := budgetRun{total: sum.Load()}
	for _, d := range all {
		if d.settleEnd.After(last) {
			out.lateOvershoot += d.over
		}
	}
	return out
}

// TestSettledBudgetUnderConcurrency: a budget of 1000 units, 64 requests at once. Reserving
// an upper bound of the cost (40, costs 0 to 40, as max_tokens bounds an LLM call), the total
// settled never exceeds the budget, on every algorithm; reported after the response instead
// (checked at cost 1, the rest charged at the end, as report-after gateways do) it is
// measured in the same run. Reserving less than some costs (20, costs 0 to 60), the windows'
// total never exceeds the budget plus the overshoot of the requests still settling when the
// last admission was made.
func TestSettledBudgetUnderConcurrency(t *testing.T) {
	const budget = 1000
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		upTo := func(n int64) func(*rand.Rand) int64 { return func(r *rand.Rand) int64 { return r.Int64N(n + 1) } }
		bounded := budgetUnder(t, l, alg, 40, upTo(40))
		if bounded.total > budget {
			t.Fatalf("reserving an upper bound: %d settled on a budget of %d", bounded.total, budget)
		}
		after := budgetUnder(t, l, alg, 1, upTo(40))
		over := budgetUnder(t, l, alg, 20, upTo(60))
		t.Logf("%s, budget %d: reserve 40 then settle %d; report-after %d (%+d); reserve 20 then settle %d, late overshoot %d",
			alg, budget, bounded.total, after.total, after.total-budget, over.total, over.lateOvershoot)
		if windows(alg) && over.total > budget+over.lateOvershoot {
			t.Fatalf("reserving less than some costs: %d settled, over the budget %d plus the late overshoot %d",
				over.total, budget, over.lateOvershoot)
		}
	})
}
