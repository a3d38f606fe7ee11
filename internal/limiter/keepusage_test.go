package limiter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Issue 28, item 4: a tier change or a per-caller override switches a caller to other
// numbers for the same limits (same names, so the same keys; same periods) mid-window. With
// Spec.KeepUsage the caller keeps what it has used, in requests or tokens: 900 used of
// 1,000/day leave 99,100 of 100,000/day, and 5,000 used of 100,000/day leave nothing of
// 1,000/day. These tests run the real scripts on a real redis-server with a clock the test
// controls.

// keepPeriods are the periods the random limits pick from.
var keepPeriods = []time.Duration{time.Second, time.Minute, time.Hour, keepDay}

// logUniform is 1 to top, about as often each power of ten.
func logUniform(rng *rand.Rand, top int64) int64 {
	return max(1, min(top, int64(math.Exp(rng.Float64()*math.Log(float64(top))))))
}

// keepLimit is a random limit named name over period that the algorithm can run.
func keepLimit(rng *rand.Rand, alg Algorithm, name string, period time.Duration) Limit {
	for {
		l := Limit{Name: name, Requests: logUniform(rng, 100_000), Period: period}
		if (alg == TokenBucket || alg == GCRA) && rng.IntN(2) == 0 {
			l.Burst = logUniform(rng, 100_000)
		}
		if checkLimit(alg, l) == nil {
			return l
		}
	}
}

// keepPolicy is a keep-usage policy of limits on the keys of namespace "keep", policy
// "tiers-<alg>": every policy of an algorithm shares them, as the tiers of one policy do.
func keepPolicy(t testing.TB, alg Algorithm, ttl time.Duration, limits ...Limit) *Policy {
	t.Helper()
	p, err := NewPolicy(Spec{Namespace: "keep", Name: "tiers-" + string(alg), Algorithm: alg, Limits: limits,
		StateKey: testTemplate, IdempotencyKey: testIdemTemplate, TTL: ttl, IdempotencyTTL: time.Hour,
		IdempotencyMaxReplays: 3, FailureMode: FailOpen, KeepUsage: true})
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

// keepPair is two random policies on the same keys that differ only in requests and burst:
// one to three limits, each with the same name and period in both.
func keepPair(t testing.TB, rng *rand.Rand, alg Algorithm) (a, b *Policy) {
	t.Helper()
	var la, lb []Limit
	for _, name := range editLimitNames[:1+rng.IntN(len(editLimitNames))] {
		period := keepPeriods[rng.IntN(len(keepPeriods))]
		la, lb = append(la, keepLimit(rng, alg, name, period)), append(lb, keepLimit(rng, alg, name, period))
	}
	ttl := max(Horizon(alg, la), Horizon(alg, lb)) + time.Hour
	return keepPolicy(t, alg, ttl, la...), keepPolicy(t, alg, ttl, lb...)
}

// minSize is the smallest capacity of p's limits.
func minSize(p *Policy) int64 {
	out := p.size(0)
	for i := range p.Limits {
		out = min(out, p.size(i))
	}
	return out
}

// shortestPeriod is the shortest period of p's limits, in µs.
func shortestPeriod(p *Policy) int64 {
	out := p.Limits[0].Period
	for _, l := range p.Limits {
		out = min(out, l.Period)
	}
	return out.Microseconds()
}

// probe is what limit i of p reports as remaining for identity: a check of p's limit i
// alone (the same key) of a cost beyond its capacity, always denied, debiting nothing.
func probe(t *testing.T, run *fakeClockRunner, p *Policy, i int, identity string) int64 {
	t.Helper()
	c := p.Spec
	c.Limits = []Limit{p.Limits[i]}
	one, err := NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	_, d := run.check(t, one, identity, "", p.size(i)+1)
	if d.Allowed || d.RetryAfter != -1 {
		t.Fatalf("probe of %s %+v with cost %d: %+v; want denied for good", p.Algorithm, p.Limits[i], p.size(i)+1, d)
	}
	return d.Remaining
}

// keepTally is what a run measured.
type keepTally struct {
	checks, admitted, overAdmitted, switches, exactAtSwitch int64
}

// TestTierChangeKeepsUsage is the randomized property, for every algorithm, KeepUsage on:
// policies A and B on the same keys, differing only in requests and burst per limit. The
// caller uses u units under A at one instant; at that instant B reports max(0, capB - u) for
// every limit, exactly (capB: requests for the windows, burst for the buckets), and so do A
// on the way back and B again (a switch down and back forgives nothing). Then, with the clock moving and random costs, five more switches back
// and forth; every decision must equal the reference model (keepmodel_test.go) and fit its
// limit (remaining in [0, size], no reset or retry past the limit's horizon), at every switch
// each limit's remaining must be what the model says and never above the exact rule's, and
// over-admission, admissions the exact rule (usage carried in tokens, no rounding) refuses,
// is counted and must be 0.
func TestTierChangeKeepsUsage(t *testing.T) {
	_, rdb := standalone(t)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			s, _ := ScriptFor(alg)
			run := &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
			var tally keepTally
			for seed := range uint64(40) {
				rng := rand.New(rand.NewPCG(seed, uint64(len(alg))))
				a, b := keepPair(t, rng, alg)
				keepRun(t, run, rng, fmt.Sprintf("caller-%d", seed), a, b, &tally)
			}
			t.Logf("%s: %d checks, %d admitted, over-admitted %d; %d switches, %d limits at exactly max(0, cap - u) at the first three",
				alg, tally.checks, tally.admitted, tally.overAdmitted, tally.switches, tally.exactAtSwitch)
			if tally.overAdmitted != 0 {
				t.Errorf("over-admission %d, want 0", tally.overAdmitted)
			}
		})
	}
}

// keepRun is one caller's run of TestTierChangeKeepsUsage.
func keepRun(t *testing.T, run *fakeClockRunner, rng *rand.Rand, id string, a, b *Policy, tally *keepTally) {
	t.Helper()
	now := int64(1_760_000_000_000_000) + rng.Int64N(1_000_000_000_000)
	model := newKeepModel(a)
	rules := make([]*exactRule, len(a.Limits))
	for i, l := range a.Limits {
		rules[i] = newExactRule(a.Algorithm, l, now)
	}
	run.setNow(t, now)
	u := keepUsage(t, run, rng, a, id, now, model, rules)
	// Back and forth at the instant of the first switch: every switch leaves every limit its
	// capacity less u, exactly. The windows count requests. A bucket's debt of u whole tokens
	// rescales exactly where it fits the capacity, and where it does not (an empty bucket)
	// the denied probe writes nothing, so the state keeps all of u for the way back.
	for k, p := range []*Policy{b, a, b} {
		rerate(model, p)
		for i := range p.Limits {
			rules[i].rerate(p.Limits[i], now)
			_, m, _, _, _ := model.limits[i].check(float64(now), float64(p.size(i)+1))
			want, exact := max(0, p.size(i)-u), rules[i].remaining(now)
			got := probe(t, run, p, i, id)
			followState(t, run.rdb, p, id, now, rules)
			if got != int64(m) || got > exact || got != want {
				t.Fatalf("%s: %d used under %+v, then %+v (switch %d at one instant) reports %d remaining; want %d (model %v, exact rule %d)",
					id, u, a.Limits, p.Limits[i], k, got, want, m, exact)
			}
			if got == want {
				tally.exactAtSwitch++
			}
		}
	}
	cur, next := b, a
	for sw := range 6 {
		for step := range 30 {
			now += randomStep(rng, shortestPeriod(cur))
			keepStep(t, run, rng, fmt.Sprintf("%s, switch %d, step %d (%+v then %+v)", id, sw, step, a.Limits, b.Limits),
				cur, id, now, requestIDFor(rng, step), model, rules, tally)
		}
		// Switch at this instant: each limit of next reports what the model says, never more
		// than the exact rule leaves.
		rerate(model, next)
		for i, l := range next.Limits {
			rules[i].rerate(l, now)
			exact := rules[i].remaining(now)
			_, want, _, _, _ := model.limits[i].check(float64(now), float64(next.size(i)+1))
			got := probe(t, run, next, i, id)
			followState(t, run.rdb, next, id, now, rules)
			if got != int64(want) || got > exact {
				t.Fatalf("%s, switch %d to %+v: remaining %d, model %v, exact rule %d", id, sw, l, got, want, exact)
			}
		}
		tally.switches++
		cur, next = next, cur
	}
}

// keepUsage spends a random u (0 to the smallest capacity of a) under a at now, in a few
// checks, all admitted, and returns u.
func keepUsage(t *testing.T, run *fakeClockRunner, rng *rand.Rand, a *Policy, id string, now int64, model *policyModel, rules []*exactRule) int64 {
	t.Helper()
	var u int64
	switch top := minSize(a); rng.IntN(4) {
	case 0:
		u = top
	case 1:
		u = rng.Int64N(min(top, 10) + 1)
	default:
		u = rng.Int64N(top + 1)
	}
	for left, k := u, 0; left > 0; k++ {
		cost := left
		if k < 4 && left > 1 {
			cost = 1 + rng.Int64N(left)
		}
		want := model.check(float64(now), float64(cost))
		_, d := run.check(t, a, id, requestIDFor(rng, k), cost)
		if !d.Allowed || d != want {
			t.Fatalf("%s: spending %d of %d under %+v: %+v, model %+v", id, cost, u, a.Limits, d, want)
		}
		for _, r := range rules {
			r.admit(now, cost)
		}
		left -= cost
	}
	return u
}

// keepStep is one check of p at now: it must equal the model and fit its limit; an
// admission the exact rule refuses is over-admission.
func keepStep(t *testing.T, run *fakeClockRunner, rng *rand.Rand, where string, p *Policy, id string, now int64, requestID string,
	model *policyModel, rules []*exactRule, tally *keepTally) {
	t.Helper()
	cost := randomCost(rng, minSize(p))
	run.setNow(t, now)
	allowed := true
	for _, r := range rules {
		allowed = allowed && r.allows(now, cost)
	}
	want := model.check(float64(now), float64(cost))
	_, d := run.check(t, p, id, requestID, cost)
	followState(t, run.rdb, p, id, now, rules)
	checkSaneDecision(t, where, p, d)
	if d != want {
		t.Fatalf("%s: cost %d: %+v; model %+v", where, cost, d, want)
	}
	tally.checks++
	if !d.Allowed {
		return
	}
	tally.admitted += cost
	if !allowed {
		tally.overAdmitted += cost
		t.Errorf("%s: admitted cost %d that the exact rule refuses", where, cost)
	}
	for _, r := range rules {
		r.admit(now, cost)
	}
}

// TestTierChangeIssueFigures is the issue's example, for every algorithm, KeepUsage on, one
// limit "daily" shared by tiers free (1,000/day) and pro (100,000/day), at 10:00 of a day.
// Upgrade: 900 used under free leave 99,100 under pro (not 100,000 and not 100). Downgrade:
// 5,000 used under pro deny under free; FixedWindow until the day's window ends, then
// admits; SlidingWindow also through the window's end, until the previous day's 5,000 weigh
// less than 1,000 (80% into the next day); TokenBucket and GCRA keep the 5,000 tokens of debt,
// refilling at pro's rate (0.864 s each), and deny under free until it fits free's 1,000
// (not once one of free's tokens has refilled, 86.4 s, as if the debt were forgiven down to
// 1,000): at 999 and 1 µs of pro's tokens the debt converts to free's rate (999 tokens and
// 100 µs), and the next token is then free's, 100 µs later.
func TestTierChangeIssueFigures(t *testing.T) {
	_, rdb := standalone(t)
	day := keepDay.Microseconds()
	start := int64(20_400)*day + 10*time.Hour.Microseconds() // 2025-11-07 10:00 UTC
	for _, alg := range algorithms {
		s, _ := ScriptFor(alg)
		run := &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
		ttl := 2*keepDay + time.Hour
		free := keepPolicy(t, alg, ttl, Limit{Name: "daily", Requests: 1_000, Period: keepDay})
		pro := keepPolicy(t, alg, ttl, Limit{Name: "daily", Requests: 100_000, Period: keepDay})
		t.Run(string(alg)+"/upgrade", func(t *testing.T) {
			run.setNow(t, start)
			spend(t, run, free, "upgrader", 900, 1)
			if got := probe(t, run, pro, 0, "upgrader"); got != 99_100 {
				t.Fatalf("900 used of 1,000/day, then 100,000/day leaves %d; want 99,100", got)
			}
			if _, d := run.check(t, pro, "upgrader", "", 1); !d.Allowed || d.Remaining != 99_099 {
				t.Fatalf("the next request under pro: %+v; want admitted with 99,099 left", d)
			}
		})
		t.Run(string(alg)+"/downgrade", func(t *testing.T) {
			run.setNow(t, start)
			spend(t, run, pro, "downgrader", 5_000, 100)
			_, d := run.check(t, free, "downgrader", "", 1)
			if d.Allowed || d.Remaining != 0 {
				t.Fatalf("5,000 used of 100,000/day, then under 1,000/day: %+v; want denied with 0 left", d)
			}
			for _, c := range downgradeTimeline(alg, start, day) {
				run.setNow(t, c.at)
				if _, d := run.check(t, free, "downgrader", "", 1); d.Allowed != c.admit {
					t.Fatalf("%s after the downgrade: %+v; want allowed=%v", c.when, d, c.admit)
				}
			}
		})
	}
}

// downgradeCheck is a check at a moment after the downgrade and whether it must be admitted.
type downgradeCheck struct {
	when  string
	at    int64
	admit bool
}

// downgradeTimeline is when TestTierChangeIssueFigures' downgraded caller is checked: denied
// up to the moment it may be admitted again, admitted then.
func downgradeTimeline(alg Algorithm, start, day int64) []downgradeCheck {
	end := start - start%day + day // the day's window ends
	switch alg {
	case FixedWindow:
		return []downgradeCheck{{"1 µs before the window ends", end - 1, false}, {"as the window ends", end, true}}
	case SlidingWindow:
		// 5,000 * (1 - e) + 1 <= 1,000 from e = 0.8002 of the next day on.
		return []downgradeCheck{{"1 µs before the window ends", end - 1, false}, {"as the window ends", end, false},
			{"80% into the next day", end + day*8/10, false}, {"80.03% into the next day", end + day*8003/10000, true}}
	}
	T, T0 := int64(86_400_000), int64(864_000) // free's and pro's µs per token
	at := start + 4001*T0 - 1                  // 999 of pro's tokens and 1 µs owed
	return []downgradeCheck{{"as one of free's tokens refills", start + T, false},
		{"1 µs before 4,000 of pro's tokens refill", start + 4000*T0 - 1, false},
		{"as 4,000 of pro's tokens refill (1,000 owed: free's whole capacity)", start + 4000*T0, false},
		{"1 µs before 4,001 of pro's tokens refill (999 and 1 µs owed: converted to free's rate)", at, false},
		{"99 µs later, at free's rate", at + 99, false}, {"100 µs later, as one of free's tokens is free", at + 100, true},
		{"just after", at + 101, false}}
}

// spend uses n units of p for identity at the clock's instant, in checks of cost, all
// admitted.
func spend(t *testing.T, run *fakeClockRunner, p *Policy, identity string, n, cost int64) {
	t.Helper()
	for range n / cost {
		if _, d := run.check(t, p, identity, "", cost); !d.Allowed {
			t.Fatalf("spending %d of %+v: %+v", n, p.Limits, d)
		}
	}
}
