package limiter

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

// Keep-usage (Spec.KeepUsage) for the lease scripts (the local tier): a lease debits a
// limit as one request of its granted units would, so it reads and writes the state a tier
// change rescaled exactly as a check does, and a lease returned after a tier change gives
// back its unspent units in tokens, not in the µs of the rate it was taken at.

// leaseRunner runs an algorithm's lease script wrapped in the fake clock of a
// fakeClockRunner (the same clock key), the way the local tier calls it.
type leaseRunner struct {
	rdb redis.UniversalClient
	src string
}

func newLeaseRunner(rdb redis.UniversalClient, alg Algorithm) *leaseRunner {
	return &leaseRunner{rdb: rdb, src: withFakeClock(scriptOf(scripts.Lease, alg))}
}

// leaseReplyOf is a lease script's reply: granted, returned, left, then the offsets.
type leaseReplyOf struct {
	granted, returned, left int64
	offs                    []int64
}

// take asks p's lease script for k units for identity under record id (share 1), returning
// prev first when set, and returns its reply.
func (r *leaseRunner) take(t *testing.T, p *Policy, identity, id string, k int64, prev *lease) leaseReplyOf {
	t.Helper()
	keys := leaseKeys(p.Keys(identity, ""), id, prev)
	v, err := r.rdb.Eval(context.Background(), r.src, keys, p.leaseArgs(k, 1, prev, time.Now())...).Result()
	if err != nil {
		t.Fatalf("%s lease: EVAL: %v", p.Algorithm, err)
	}
	return leaseReplyFrom(t, v)
}

// leaseReplyFrom decodes a lease script's reply.
func leaseReplyFrom(t *testing.T, v any) leaseReplyOf {
	t.Helper()
	r, ok := v.([]any)
	if !ok || len(r) < 3 {
		t.Fatalf("lease reply %v", v)
	}
	n := make([]int64, len(r))
	for i, x := range r {
		if n[i], ok = x.(int64); !ok {
			t.Fatalf("lease reply %v: element %d is %T", v, i, x)
		}
	}
	return leaseReplyOf{granted: n[0], returned: n[1], left: n[2], offs: n[3:]}
}

// TestTierChangeLeasesKeepUsage is the figures for the lease scripts, KeepUsage on,
// tiers free (1,000/day) and pro (100,000/day) of one limit "daily": 900 used under free,
// then a lease under pro of everything gets 99,100 units, for every algorithm; 5,000 used
// under pro leave no lease under free, and for TokenBucket and GCRA none until the debt,
// refilling at pro's rate, leaves two units (the smallest lease) of free's capacity: not
// once two have refilled at free's rate, as if the debt were forgiven down to 1,000. A lease under pro returned after a
// check under free rescaled the state gives back its unspent units in tokens.
func TestTierChangeLeasesKeepUsage(t *testing.T) {
	_, rdb := standalone(t)
	day := keepDay.Microseconds()
	start := int64(20_400)*day + 10*time.Hour.Microseconds() // 2025-11-07 10:00 UTC
	ttl := 2*keepDay + time.Hour
	for _, alg := range algorithms {
		s, _ := ScriptFor(alg)
		k := &leaseFigures{run: &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}, leases: newLeaseRunner(rdb, alg),
			free:  keepPolicy(t, alg, ttl, Limit{Name: "daily", Requests: 1_000, Period: keepDay}),
			pro:   keepPolicy(t, alg, ttl, Limit{Name: "daily", Requests: 100_000, Period: keepDay}),
			start: start, buckets: alg == TokenBucket || alg == GCRA}
		t.Run(string(alg)+"/upgrade", k.upgrade)
		t.Run(string(alg)+"/downgrade", k.downgrade)
		if k.buckets {
			t.Run(string(alg)+"/return", k.giveBack)
		}
	}
}

// leaseFigures are TestTierChangeLeasesKeepUsage's cases for one algorithm.
type leaseFigures struct {
	run       *fakeClockRunner
	leases    *leaseRunner
	free, pro *Policy
	start     int64
	buckets   bool // TokenBucket or GCRA
}

// upgrade: 900 used under free, then a lease of everything under pro gets 99,100.
func (k *leaseFigures) upgrade(t *testing.T) {
	k.run.setNow(t, k.start)
	spend(t, k.run, k.free, "lease-upgrader", 900, 1)
	if r := k.leases.take(t, k.pro, "lease-upgrader", "l1", 1_000_000, nil); r.granted != 99_100 || r.left != 0 {
		t.Fatalf("900 used of 1,000/day, then a lease of everything under 100,000/day: %+v; want 99,100 granted, 0 left", r)
	}
	if got := probe(t, k.run, k.pro, 0, "lease-upgrader"); got != 0 {
		t.Fatalf("after the lease, pro reports %d remaining; want 0", got)
	}
}

// downgrade: 5,000 used under pro leave no lease under free, and for the buckets none until
// the debt, refilling at pro's rate, leaves two units of free's capacity.
func (k *leaseFigures) downgrade(t *testing.T) {
	k.run.setNow(t, k.start)
	spend(t, k.run, k.pro, "lease-downgrader", 5_000, 100)
	if r := k.leases.take(t, k.free, "lease-downgrader", "l1", 10, nil); r.granted != 0 || r.left != 0 {
		t.Fatalf("5,000 used of 100,000/day, then a lease under 1,000/day: %+v; want nothing granted, 0 left", r)
	}
	if !k.buckets {
		return
	}
	T, T0 := int64(86_400_000), int64(864_000) // free's and pro's µs per token
	for _, c := range []struct {
		at      int64
		granted int64
		when    string
	}{
		{k.start + 2*T, 0, "as two tokens would refill at free's rate"},
		{k.start + 4000*T0, 0, "as 4,000 of pro's tokens refill (1,000 owed)"},
		{k.start + 4002*T0, 2, "as 4,002 of pro's tokens refill (998 owed)"},
	} {
		k.run.setNow(t, c.at)
		if r := k.leases.take(t, k.free, "lease-downgrader", fmt.Sprintf("l-%d", c.at), 10, nil); r.granted != c.granted || r.left != 0 {
			t.Fatalf("%s: %+v; want %d granted, 0 left", c.when, r, c.granted)
		}
	}
}

// giveBack: a lease under pro returned after a check under free rescaled the state gives
// back its unspent units in tokens.
func (k *leaseFigures) giveBack(t *testing.T) {
	k.run.setNow(t, k.start)
	spend(t, k.run, k.free, "returner", 100, 1)
	r := k.leases.take(t, k.pro, "returner", "l1", 400, nil)
	if r.granted != 400 || r.left != 99_500 {
		t.Fatalf("100 used under free, then a lease of 400 under pro: %+v; want 400 granted, 99,500 left", r)
	}
	// A check under free rescales the state to free's T (and writes it back).
	if got := probe(t, k.run, k.free, 0, "returner"); got != 500 {
		t.Fatalf("100 used and 400 leased, free reports %d remaining; want 500", got)
	}
	// 100 of the lease spent, 300 returned under pro: 300 tokens, whatever T the state was
	// written at since.
	back := k.leases.take(t, k.pro, "returner", "l2", 0, &lease{id: "l1", units: 400, next: 100})
	if back.returned != 300 {
		t.Fatalf("returning 300 unspent units: %+v; want 300 returned", back)
	}
	for _, c := range []struct {
		p    *Policy
		want int64
		name string
	}{{k.pro, 99_800, "pro"}, {k.free, 800, "free"}} {
		if got := probe(t, k.run, c.p, 0, "returner"); got != c.want {
			t.Fatalf("200 used in all, %s reports %d remaining; want %d", c.name, got, c.want)
		}
	}
}

// TestTierChangeLeasesNeverOverAdmit is the randomized property for the lease scripts of
// TokenBucket and GCRA, KeepUsage on: policies A and B on the same keys (requests and burst
// differ per limit), checks and leases of random sizes under either as the clock moves (a
// change in force from the first call under it whose read does not cap the debt).
// Every unit a lease grants counts as admitted when granted; none may be one the exact rule
// (usage carried in tokens, no rounding, refilling at the rate the state records) refuses,
// and a lease's reported left is never more than the exact rule leaves.
func TestTierChangeLeasesNeverOverAdmit(t *testing.T) {
	_, rdb := standalone(t)
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			s, _ := ScriptFor(alg)
			p := &leaseProperty{rdb: rdb, run: &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}, leases: newLeaseRunner(rdb, alg)}
			for seed := range uint64(30) {
				p.caller(t, alg, seed)
			}
			t.Logf("%s: %d admitted by checks, %d granted by leases, over-admitted %d", alg, p.checked, p.granted, p.over)
			if p.over != 0 || p.granted == 0 {
				t.Errorf("over-admission %d, want 0 (and some leases granted: %d)", p.over, p.granted)
			}
		})
	}
}

// leaseProperty runs TestTierChangeLeasesNeverOverAdmit's callers and sums what they were
// given.
type leaseProperty struct {
	rdb                    redis.UniversalClient
	run                    *fakeClockRunner
	leases                 *leaseRunner
	granted, checked, over int64
}

// caller is one random caller of 120 steps, switching between two random policies.
func (p *leaseProperty) caller(t *testing.T, alg Algorithm, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	a, b := keepPair(t, rng, alg)
	id := fmt.Sprintf("lease-caller-%d", seed)
	now := int64(1_760_000_000_000_000) + rng.Int64N(1_000_000_000_000)
	rules := make([]*exactRule, len(a.Limits))
	for i, l := range a.Limits {
		rules[i] = newExactRule(alg, l, now)
	}
	cur := a
	for step := range 120 {
		now += randomStep(rng, shortestPeriod(cur))
		p.run.setNow(t, now)
		// A tier change: its capacity is in force from the caller's first call under it, its
		// rate once a call writes it (until then the state refills at the rate it was written
		// at; the rules follow the state after every call).
		if rng.IntN(8) == 0 {
			cur = map[bool]*Policy{true: a, false: b}[cur == b]
			for i, l := range cur.Limits {
				rules[i].rerate(l, now)
			}
		}
		where := fmt.Sprintf("%s step %d (%+v / %+v)", id, step, a.Limits, b.Limits)
		if rng.IntN(2) == 0 {
			p.check(t, where, cur, id, now, randomCost(rng, minSize(cur)), rules)
			continue
		}
		p.lease(t, where, cur, id, fmt.Sprintf("l%d", step), now, 2+rng.Int64N(minSize(cur)), rules)
	}
}

// check is one check of cost: admitted only where the exact rules allow it.
func (p *leaseProperty) check(t *testing.T, where string, cur *Policy, id string, now, cost int64, rules []*exactRule) {
	allowed := true
	for _, r := range rules {
		allowed = allowed && r.allows(now, cost)
	}
	_, d := p.run.check(t, cur, id, "", cost)
	followState(t, p.rdb, cur, id, now, rules)
	checkSaneDecision(t, where, cur, d)
	if !d.Allowed {
		return
	}
	p.checked += cost
	if !allowed {
		p.over += cost
		t.Errorf("%s: check of cost %d admitted; the exact rule refuses it", where, cost)
	}
	for _, r := range rules {
		r.admit(now, cost)
	}
}

// lease is one lease of up to want units: granted only where the exact rules allow it, and
// never reporting more left than they leave.
func (p *leaseProperty) lease(t *testing.T, where string, cur *Policy, id, leaseID string, now, want int64, rules []*exactRule) {
	r := p.leases.take(t, cur, id, leaseID, want, nil)
	if r.granted == 0 {
		followState(t, p.rdb, cur, id, now, rules)
		return
	}
	p.granted += r.granted
	exactLeft := int64(1 << 62)
	for _, e := range rules {
		if !e.allows(now, r.granted) {
			p.over += r.granted
			t.Errorf("%s: lease of %d granted; the exact rule refuses it", where, r.granted)
		}
		e.admit(now, r.granted)
		exactLeft = min(exactLeft, e.remaining(now))
	}
	if r.left > exactLeft {
		t.Errorf("%s: lease of %d leaves %d; the exact rule %d", where, r.granted, r.left, exactLeft)
	}
}

// TestKeepUsageReadsAnyValue: a TokenBucket or GCRA state key holding a value of neither
// format (text, 16 bytes that are not a time and a rate, a '>dd' value with a rate below 1,
// NaN or infinities, a key of another type) never fails a check or a lease, with KeepUsage
// on or off, on the single-limit and the general path: the scripts read it as a full bucket
// (or, for a time beyond the limit's refill time, an empty one), and the call answers.
func TestKeepUsageReadsAnyValue(t *testing.T) {
	_, rdb := standalone(t)
	ctx := context.Background()
	now := int64(1_760_000_000_000_000)
	pack := func(at, T float64) string {
		b := make([]byte, 16)
		binary.BigEndian.PutUint64(b, math.Float64bits(at))
		binary.BigEndian.PutUint64(b[8:], math.Float64bits(T))
		return string(b)
	}
	T := float64(interval(Limit{Requests: 1_000, Period: keepDay}))
	values := []struct {
		name  string
		value string // "" with hash: a hash key
		hash  bool
		full  bool // read as a full bucket: the call admits
	}{
		{"text", "not a number", false, true},
		{"empty", "", false, true},
		{"16 bytes of text", "0123456789abcdef", false, true},
		{"rate 0", pack(float64(now)+1e9, 0), false, true},
		{"negative rate", pack(float64(now)+1e9, -5), false, true},
		{"NaN rate", pack(float64(now)+1e9, math.NaN()), false, true},
		{"NaN time", pack(math.NaN(), 2*T), false, true},
		{"NaN time, this rate", pack(math.NaN(), T), false, true},
		{"time past, other rate", pack(float64(now)-1e9, 2*T), false, true},
		{"-Inf time", pack(math.Inf(-1), 2*T), false, true},
		{"infinite rate", pack(float64(now)+1e9, math.Inf(1)), false, true},
		{"fractional rate", pack(float64(now)+1e9, 1.5), false, false}, // 1e9 µs at 1.5 µs per token: more than the burst
		{"+Inf time", pack(math.Inf(1), 2*T), false, false},
		{"+Inf time, this rate", pack(math.Inf(1), T), false, false},
		{"huge time", pack(1e300, 2*T), false, false},
		{"a hash", "", true, true},
	}
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		s, _ := ScriptFor(alg)
		run := &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
		leases := newLeaseRunner(rdb, alg)
		for _, keep := range []bool{false, true} {
			for _, two := range []bool{false, true} {
				limits := []Limit{{Name: "daily", Requests: 1_000, Period: keepDay}}
				if two {
					limits = append(limits, Limit{Name: "hourly", Requests: 500, Period: time.Hour})
				}
				p, err := NewPolicy(Spec{Namespace: "keep", Name: fmt.Sprintf("odd-%s-%v-%v", alg, keep, two), Algorithm: alg,
					Limits: limits, StateKey: testTemplate, IdempotencyKey: testIdemTemplate, TTL: 2 * keepDay,
					IdempotencyTTL: time.Hour, IdempotencyMaxReplays: 3, FailureMode: FailOpen, KeepUsage: keep})
				if err != nil {
					t.Fatalf("NewPolicy: %v", err)
				}
				for i, v := range values {
					where := fmt.Sprintf("%s keep=%v limits=%d %s", alg, keep, len(limits), v.name)
					id := fmt.Sprintf("odd-%d", i)
					set := func() {
						key := p.Keys(id, "")[0]
						rdb.Del(ctx, key)
						var err error
						if v.hash {
							err = rdb.HSet(ctx, key, "f", "v").Err()
						} else {
							err = rdb.Set(ctx, key, v.value, 0).Err()
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					run.setNow(t, now)
					set()
					_, d := run.check(t, p, id, "", 1)
					checkSaneDecision(t, where, p, d)
					if d.Allowed != v.full {
						t.Errorf("%s: check %+v; want allowed=%v", where, d, v.full)
					}
					set()
					if r := leases.take(t, p, id, "l", 10, nil); (r.granted == 10) != v.full {
						t.Errorf("%s: lease %+v; want granted=%v", where, r, v.full)
					}
					// A return onto the value: it answers, whatever it holds.
					set()
					leases.take(t, p, id, "l2", 0, &lease{id: "l", units: 10, next: 3})
				}
			}
		}
	}
}
