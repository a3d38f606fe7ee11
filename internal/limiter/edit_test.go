package limiter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// An operator edits a policy while callers are mid-window: the period, requests, burst, the
// algorithm, or which limits exist. Every identity's stored state must then read sanely under
// the new policy: reported figures within the new limit's own horizon, never a negative
// remaining, and never more admitted than the new limit allows from a fresh start. These
// tests run the real scripts on a real redis-server with a clock the test controls.

// editLimitNames are the limit names edits pick from, so limits survive, appear and vanish.
var editLimitNames = []string{"a", "b", "c"}

// editPeriods are the periods edits pick from: tiny to a year, so a period can grow or
// shrink by a factor of up to 3e10 in one edit.
var editPeriods = []time.Duration{time.Millisecond, 7 * time.Millisecond, 250 * time.Millisecond, time.Second,
	1300 * time.Millisecond, time.Minute, time.Hour, 24 * time.Hour, 8760 * time.Hour}

// randomEditPolicy is a random policy on the shared keys of namespace "edit", policy "p"
// (drawn again when whole-µs steps cannot represent its rate).
func randomEditPolicy(t *testing.T, rng *rand.Rand) *Policy {
	t.Helper()
	for range 100 {
		if p := tryEditPolicy(rng); p != nil {
			return p
		}
	}
	t.Fatal("no representable random policy in 100 draws")
	return nil
}

func tryEditPolicy(rng *rand.Rand) *Policy {
	alg := algorithms[rng.IntN(len(algorithms))]
	names := rng.Perm(len(editLimitNames))[:1+rng.IntN(len(editLimitNames))]
	var limits []Limit
	for _, n := range names {
		l := Limit{Name: editLimitNames[n], Requests: 1 + rng.Int64N(40), Period: editPeriods[rng.IntN(len(editPeriods))]}
		if (alg == TokenBucket || alg == GCRA) && rng.IntN(2) == 0 {
			l.Burst = 1 + rng.Int64N(60)
		}
		limits = append(limits, l)
	}
	p, err := NewPolicy(Spec{Namespace: "edit", Name: "p", Algorithm: alg, Limits: limits,
		StateKey: testTemplate, IdempotencyKey: testIdemTemplate, TTL: Horizon(alg, limits) + time.Hour,
		IdempotencyTTL: time.Hour, IdempotencyMaxReplays: 3, FailureMode: FailOpen})
	if err != nil {
		return nil
	}
	return p
}

// limitHorizon is how far ahead a limit's reported reset or retry may reach: the window
// (FixedWindow), two windows (SlidingWindow), or the time to refill from empty.
func limitHorizon(p *Policy, name string) time.Duration {
	for _, l := range p.Limits {
		if l.Name == name {
			return Horizon(p.Algorithm, []Limit{l})
		}
	}
	return 0
}

// admissionBound tracks, for one limit of the new policy, what it may have admitted since
// the edit from a fresh start: per aligned window for the windows, burst plus refill for the
// buckets.
type admissionBound struct {
	l           Limit
	alg         Algorithm
	start       int64           // µs of the edit
	admitted    int64           // cost admitted since the edit (buckets)
	perWindow   map[int64]int64 // cost admitted per aligned window (windows)
	windowLimit int64
}

func newAdmissionBound(p *Policy, i int, start int64) *admissionBound {
	return &admissionBound{l: p.Limits[i], alg: p.Algorithm, start: start, perWindow: map[int64]int64{},
		windowLimit: p.Limits[i].Requests}
}

// admit records an admission of cost at now and reports what the limit allows, when exceeded.
func (b *admissionBound) admit(now, cost int64) error {
	if b.alg == TokenBucket || b.alg == GCRA {
		b.admitted += cost
		T := interval(b.l)
		if allowed := burstOf(b.alg, b.l) + (now-b.start)/T; b.admitted > allowed {
			return fmt.Errorf("limit %s admitted %d since the edit, more than the %d it allows from full", b.l.Name, b.admitted, allowed)
		}
		return nil
	}
	w := now / b.l.Period.Microseconds()
	b.perWindow[w] += cost
	if b.perWindow[w] > b.windowLimit {
		return fmt.Errorf("limit %s admitted %d in window %d, more than its %d", b.l.Name, b.perWindow[w], w, b.windowLimit)
	}
	return nil
}

// TestEditedPolicyReadsStateSanely is the randomized property: policy A, traffic, an edit
// to policy B (any algorithm, periods from 1ms to a year, requests, bursts, limits added and
// removed), traffic; checked after the edit, for every decision: remaining in [0, size],
// reset and retry within the reported limit's own horizon, and admissions within what B
// allows from a fresh start.
func TestEditedPolicyReadsStateSanely(t *testing.T) {
	_, rdb := standalone(t)
	runners := map[Algorithm]*fakeClockRunner{}
	for _, alg := range algorithms {
		s, _ := ScriptFor(alg)
		runners[alg] = &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
	}
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 99))
		a, b := randomEditPolicy(t, rng), randomEditPolicy(t, rng)
		id := fmt.Sprintf("caller-%d", seed)
		now := int64(1_760_000_000_000_000) + rng.Int64N(1_000_000_000_000)
		// Phase A: enough traffic to exhaust A's tightest limit at times.
		for step := range 60 {
			now += rng.Int64N(a.Limits[0].Period.Microseconds()/10 + 1)
			runners[a.Algorithm].setNow(t, now)
			runners[a.Algorithm].check(t, a, id, requestIDFor(rng, step), 1+rng.Int64N(3))
		}
		bounds := make([]*admissionBound, len(b.Limits))
		for i := range b.Limits {
			bounds[i] = newAdmissionBound(b, i, now)
		}
		for step := range 120 {
			now += editStep(rng, b)
			cost := 1 + rng.Int64N(3)
			run := runners[b.Algorithm]
			run.setNow(t, now)
			_, d := run.check(t, b, id, requestIDFor(rng, 1000+step), cost)
			where := fmt.Sprintf("seed %d, step %d after editing %s %+v to %s %+v", seed, step, a.Algorithm, a.Limits, b.Algorithm, b.Limits)
			checkSaneDecision(t, where, b, d)
			if !d.Allowed {
				continue
			}
			for _, bd := range bounds {
				if err := bd.admit(now, cost); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
			}
		}
	}
}

// requestIDFor is "" (the single-limit path) or a fresh id (the general path, never a replay).
func requestIDFor(rng *rand.Rand, step int) string {
	if rng.IntN(2) == 0 {
		return ""
	}
	return fmt.Sprintf("r%d-%d", step, rng.Int64())
}

// editStep moves the clock by up to a tenth of the new policy's shortest period, and now and
// then across a whole one.
func editStep(rng *rand.Rand, p *Policy) int64 {
	shortest := p.Limits[0].Period
	for _, l := range p.Limits {
		shortest = min(shortest, l.Period)
	}
	if rng.IntN(15) == 0 {
		return shortest.Microseconds() + rng.Int64N(shortest.Microseconds())
	}
	return rng.Int64N(shortest.Microseconds()/10 + 1)
}

// checkSaneDecision fails unless d's figures fit the limit they name.
func checkSaneDecision(t *testing.T, where string, p *Policy, d Decision) {
	t.Helper()
	h := limitHorizon(p, d.LimitName) + time.Millisecond // figures leave rounded up to ms
	switch {
	case d.LimitName == "":
		t.Fatalf("%s: decision names no limit: %+v", where, d)
	case d.Remaining < 0 || d.Remaining > d.Limit:
		t.Fatalf("%s: remaining %d outside [0, %d]: %+v", where, d.Remaining, d.Limit, d)
	case d.ResetAfter < 0 || d.ResetAfter > h:
		t.Fatalf("%s: reset after %s beyond the limit's horizon %s: %+v", where, d.ResetAfter, h, d)
	case d.RetryAfter > h:
		t.Fatalf("%s: retry after %s beyond the limit's horizon %s: %+v", where, d.RetryAfter, h, d)
	case d.Allowed && d.RetryAfter != 0:
		t.Fatalf("%s: admitted with a retry-after: %+v", where, d)
	}
}

// TestRaisedPeriodDoesNotStrandIdentities is the reported case: FixedWindow and SlidingWindow
// stored floor(now / period), so after an edit from 1s to 1h the stored window lay "in the
// future" and the reply said to retry after about 2.2 million hours. After the edit the
// identity must be told to wait at most the new window.
func TestRaisedPeriodDoesNotStrandIdentities(t *testing.T) {
	_, rdb := standalone(t)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			s, _ := ScriptFor(alg)
			run := &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
			mk := func(period time.Duration, requests int64) *Policy {
				p, err := NewPolicy(Spec{Namespace: "edit", Name: "raise-" + string(alg), Algorithm: alg,
					Limits: []Limit{{Name: "w", Requests: requests, Period: period}}, StateKey: testTemplate,
					TTL: 2*time.Hour + time.Minute, FailureMode: FailOpen})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			before, after := mk(time.Second, 5), mk(time.Hour, 3)
			now := int64(1_764_612_345_678_901)
			run.setNow(t, now)
			for range 5 {
				run.check(t, before, "alice", "", 1)
			}
			run.setNow(t, now+1000)
			_, d := run.check(t, after, "alice", "", 1)
			if d.Allowed || d.Remaining != 0 || d.RetryAfter > 2*time.Hour || d.ResetAfter > 2*time.Hour {
				t.Fatalf("after raising the period to 1h with 5 of 3 used: %+v; want denied with 0 left, retry and reset within the new window", d)
			}
		})
	}
}
