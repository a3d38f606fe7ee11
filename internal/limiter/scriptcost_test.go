package limiter

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

// The check script answers the common call (one limit, no idempotency key) and the rest
// through one loop over limits; a call with a request id records the decision too. These
// tests hold both kinds of call to one reference model of each algorithm, with a clock the
// test controls: every decision must equal the model's exactly (remaining, retry-after and
// reset-after to the millisecond), and both must leave byte-identical state.

// clockKey holds the µs the wrapped scripts read as TIME.
const clockKey = "{scriptcost}:now"

// withFakeClock is s composed to read the time stored at clockKey instead of TIME
// (scripts.ComposeOnClock), so that a test sets the clock.
func withFakeClock(s *Script) string {
	src, err := scripts.ComposeOnClock(s.Family, s.Body, clockKey)
	if err != nil {
		panic(err)
	}
	return src
}

// limitModel is one limit of the reference model: per-limit results as the driver combines
// them, in µs and with Lua's double arithmetic.
type limitModel interface {
	// check returns the limit's verdict at now for cost and, when ok, the state to commit.
	check(now, cost float64) (ok bool, r, retry, reset float64, commit func())
}

// bucketModel is TokenBucket and GCRA (which admit exactly alike): the time the bucket is
// full again, in µs.
type bucketModel struct {
	T, burst float64
	full     float64
	has      bool
}

func (m *bucketModel) check(now, cost float64) (bool, float64, float64, float64, func()) {
	full := now
	if m.has && m.full > now {
		full = m.full
	}
	limitCap, used := m.burst*m.T, full-now
	after := used + cost*m.T
	left := math.Max(0, math.Floor((limitCap-used)/m.T))
	switch {
	case cost > m.burst:
		return false, left, -1, used, nil
	case after > limitCap:
		return false, left, after - limitCap, used, nil
	}
	return true, math.Floor((limitCap - after) / m.T), 0, after, func() { m.full, m.has = now+after, true }
}

// fixedModel is FixedWindow: the newest window seen and its count.
type fixedModel struct {
	requests, period float64
	win, count       float64
	has              bool
}

func (m *fixedModel) check(now, cost float64) (bool, float64, float64, float64, func()) {
	win, count := math.Floor(now/m.period), 0.0
	if m.has && m.win >= win {
		win, count = m.win, m.count
	}
	reset := (win+1)*m.period - now
	// More counted than requests allows (requests lowered by an edit or a tier change) leaves
	// nothing, not less, as the script says.
	left := math.Max(0, m.requests-count)
	switch {
	case cost > m.requests:
		return false, left, -1, reset, nil
	case count+cost > m.requests:
		return false, left, reset, reset, nil
	}
	return true, m.requests - count - cost, 0, reset, func() { m.win, m.count, m.has = win, count+cost, true }
}

// slidingModel is SlidingWindow as specified by its original two-slot layout: a count per
// window number; the estimate weighs the previous window by its overlap. For a clock that
// only moves forward.
type slidingModel struct {
	requests, period float64
	counts           map[float64]float64
}

func (m *slidingModel) check(now, cost float64) (bool, float64, float64, float64, func()) {
	bucket := math.Floor(now / m.period)
	curr, prev := m.counts[bucket], m.counts[bucket-1]
	elapsed := now - bucket*m.period
	weight := prev*(m.period-elapsed)/m.period + curr
	reset := (bucket+1)*m.period - now
	if curr > 0 {
		reset += m.period
	}
	left := math.Floor(math.Max(0, m.requests-weight))
	switch {
	case cost > m.requests:
		return false, left, -1, reset, nil
	case weight+cost > m.requests:
		if prev > 0 && curr+cost <= m.requests {
			return false, left, (weight + cost - m.requests) * m.period / prev, reset, nil
		}
		return false, left, (m.period - elapsed) + (1-(m.requests-cost)/curr)*m.period, reset, nil
	}
	return true, math.Floor(m.requests - weight - cost), 0, (bucket+2)*m.period - now,
		func() { m.counts[bucket] = curr + cost }
}

func newLimitModel(a Algorithm, l Limit) limitModel {
	switch a {
	case TokenBucket, GCRA:
		return &bucketModel{T: float64(interval(l)), burst: float64(burstOf(a, l))}
	case FixedWindow:
		return &fixedModel{requests: float64(l.Requests), period: float64(l.Period.Microseconds())}
	default:
		return &slidingModel{requests: float64(l.Requests), period: float64(l.Period.Microseconds()), counts: map[float64]float64{}}
	}
}

// policyModel combines the limits as the driver does: all or nothing; the tightest limit
// reported when allowed, the one that must wait longest (never outranking any wait) when
// denied; milliseconds rounded up.
type policyModel struct {
	p      *Policy
	limits []limitModel
}

func newPolicyModel(p *Policy) *policyModel {
	m := &policyModel{p: p}
	for _, l := range p.Limits {
		m.limits = append(m.limits, newLimitModel(p.Algorithm, l))
	}
	return m
}

func (m *policyModel) check(now, cost float64) Decision {
	allowed, idx, worst, rem, rst := true, 0, 0.0, -1.0, 0.0
	var commits []func()
	for i, l := range m.limits {
		ok, r, retry, reset, commit := l.check(now, cost)
		switch {
		case !ok:
			if allowed || (worst >= 0 && (retry < 0 || retry > worst)) {
				idx, worst, rem, rst = i, retry, r, reset
			}
			allowed = false
		case allowed && (rem < 0 || r < rem):
			idx, rem, rst = i, r, reset
		}
		commits = append(commits, commit)
	}
	name := m.p.Limits[idx].Name
	d := Decision{Allowed: allowed, Remaining: int64(rem), Limit: m.p.size(idx), LimitName: name,
		ResetAfter: time.Duration(math.Ceil(rst/1000)) * time.Millisecond, Source: SourceRedis}
	if !allowed {
		d.DeniedBy = name
		switch {
		case worst < 0:
			d.RetryAfter = -1
		case worst > 0:
			d.RetryAfter = time.Duration(math.Ceil(worst/1000)) * time.Millisecond
		}
		return d
	}
	for _, c := range commits {
		c()
	}
	return d
}

// fakeClockRunner runs a policy's script, wrapped in the fake clock, the way Check does.
type fakeClockRunner struct {
	rdb redis.UniversalClient
	src string
}

func (f *fakeClockRunner) setNow(t *testing.T, now int64) {
	t.Helper()
	if err := f.rdb.Set(context.Background(), clockKey, now, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// check runs one call and returns the raw reply and its Decision.
func (f *fakeClockRunner) check(t *testing.T, p *Policy, identity, requestID string, cost int64) (any, Decision) {
	t.Helper()
	keys := p.Keys(identity, requestID)
	v, err := f.rdb.Eval(context.Background(), f.src, keys, p.Args(Request{Identity: identity, Cost: cost, RequestID: requestID})...).Result()
	if err != nil {
		t.Fatalf("%s: EVAL: %v", p.Algorithm, err)
	}
	d, err := decodeReply(p, v)
	if err != nil {
		t.Fatalf("%s: %v", p.Algorithm, err)
	}
	return v, d
}

func modelPolicy(t *testing.T, alg Algorithm, limits ...Limit) *Policy {
	t.Helper()
	policySeq++
	p, err := NewPolicy(Spec{Namespace: "test", Name: fmt.Sprintf("model-%s-%d", alg, policySeq),
		Algorithm: alg, Limits: limits, StateKey: testTemplate, IdempotencyKey: testIdemTemplate,
		TTL: Horizon(alg, limits) + time.Hour, IdempotencyTTL: time.Hour, IdempotencyMaxReplays: 3, FailureMode: FailOpen})
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

// pathConfigs are the policies TestScriptPathsMatchModel runs for every algorithm.
var pathConfigs = []struct {
	name   string
	limits []Limit
}{
	{"small", []Limit{{Name: "s", Requests: 5, Period: time.Second}}},
	{"burst", []Limit{{Name: "b", Requests: 10, Period: time.Second, Burst: 3}}},
	{"odd", []Limit{{Name: "o", Requests: 7, Period: 1300 * time.Millisecond}}},
	{"large", []Limit{{Name: "l", Requests: 3_000_000, Period: 50 * time.Hour}}},
	{"two", []Limit{{Name: "x", Requests: 5, Period: time.Second}, {Name: "y", Requests: 12, Period: 3 * time.Second, Burst: 4}}},
}

// TestScriptPathsMatchModel drives every algorithm through random costs and clock steps
// (within a window, across one, across several) and checks each decision of the single-limit
// path (no request id) and of the general path (a fresh request id each call, so never a
// replay) against the reference model, and the state both paths leave byte for byte. Two
// limits exercise the general path alone. Large limits and periods exercise the table reply
// of admissions whose figures do not fit one integer.
func TestScriptPathsMatchModel(t *testing.T) {
	_, rdb := standalone(t)
	for _, alg := range algorithms {
		s, err := ScriptFor(alg)
		if err != nil {
			t.Fatal(err)
		}
		run := &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
		for i, c := range pathConfigs {
			t.Run(string(alg)+"/"+c.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(alg)), uint64(i)))
				ints, tables := checkPathsAgainstModel(t, run, rng, modelPolicy(t, alg, c.limits...))
				switch {
				case len(c.limits) > 1:
				case c.name == "large" && tables == 0:
					t.Errorf("no admission with figures too large for one integer answered with a table")
				case c.name != "large" && (ints == 0 || tables != 0):
					t.Errorf("admissions answered with %d integers and %d tables, want integers only", ints, tables)
				}
			})
		}
	}
}

// checkPathsAgainstModel runs 400 random steps on identity "general" (general path) and, for
// a single limit, "fast" (single-limit path), and returns how the single-limit path answered
// its admissions: with one integer or with a table.
func checkPathsAgainstModel(t *testing.T, run *fakeClockRunner, rng *rand.Rand, p *Policy) (ints, tables int) {
	t.Helper()
	ctx := context.Background()
	fast, general := newPolicyModel(p), newPolicyModel(p)
	period, capacity := p.Limits[0].Period.Microseconds(), p.size(0)
	now := int64(1_700_000_000_000_000) + rng.Int64N(1_000_000_000)
	for step := range 400 {
		now += randomStep(rng, period)
		cost := randomCost(rng, capacity)
		run.setNow(t, now)
		want := general.check(float64(now), float64(cost))
		if _, got := run.check(t, p, "general", fmt.Sprintf("req-%d", step), cost); got != want {
			t.Fatalf("step %d (now %d, cost %d): general path %+v, model %+v", step, now, cost, got, want)
		}
		if len(p.Limits) > 1 {
			continue
		}
		want = fast.check(float64(now), float64(cost))
		v, got := run.check(t, p, "fast", "", cost)
		if got != want {
			t.Fatalf("step %d (now %d, cost %d): single-limit path %+v, model %+v", step, now, cost, got, want)
		}
		if _, ok := v.(int64); ok {
			ints++
		} else if got.Allowed {
			tables++
		}
		fv, gv := run.rdb.Get(ctx, p.Keys("fast", "")[0]).Val(), run.rdb.Get(ctx, p.Keys("general", "")[0]).Val()
		if fv != gv {
			t.Fatalf("step %d: state after the single-limit path %x, after the general path %x", step, fv, gv)
		}
	}
	return ints, tables
}

// randomStep is how far the clock moves: mostly a little, often within the window, at times
// across one or more windows, and sometimes not at all.
func randomStep(rng *rand.Rand, period int64) int64 {
	switch x := rng.IntN(20); {
	case x < 12:
		return rng.Int64N(period/20 + 1)
	case x < 17:
		return rng.Int64N(period + 1)
	case x < 19:
		return period + rng.Int64N(2*period)
	}
	return 0
}

// randomCost is mostly 1, at times up to the capacity + 1 (never admissible), and for a large
// capacity at times a good part of it.
func randomCost(rng *rand.Rand, capacity int64) int64 {
	switch x := rng.IntN(10); {
	case x == 0:
		return 1 + rng.Int64N(capacity+1)
	case x == 1 && capacity > 1000:
		return 1 + rng.Int64N(capacity/3)
	}
	return 1
}

// TestClockBackwardsKeepsNewestWindow: after a failover to a node whose clock is behind, the
// windows keep counting in the newest window seen instead of starting afresh, on both paths.
func TestClockBackwardsKeepsNewestWindow(t *testing.T) {
	_, rdb := standalone(t)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			s, _ := ScriptFor(alg)
			run := &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
			p := modelPolicy(t, alg, Limit{Name: "w", Requests: 3, Period: time.Second})
			now := int64(1_700_000_000_500_000)
			for _, id := range []string{"a", "b"} {
				run.setNow(t, now)
				for i := range 3 {
					req := ""
					if id == "b" {
						req = fmt.Sprintf("r%d", i)
					}
					if _, d := run.check(t, p, id, req, 1); !d.Allowed {
						t.Fatalf("%s: request %d denied: %+v", id, i, d)
					}
				}
				run.setNow(t, now-1_200_000) // back by more than a window
				req := ""
				if id == "b" {
					req = "late"
				}
				if _, d := run.check(t, p, id, req, 1); d.Allowed {
					t.Fatalf("%s: after the clock went back a window: %+v, want denied (the newest window is full)", id, d)
				}
			}
		})
	}
}

// TestWrongTypeKeyCountsAsFresh: a state key of another type counts as fresh state on both
// paths and is overwritten by the admission.
func TestWrongTypeKeyCountsAsFresh(t *testing.T) {
	_, rdb := standalone(t)
	ctx := context.Background()
	l := newLimiter(t, rdb, Options{})
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			p := newPolicy(t, alg, FailOpen, perHour("hourly", 5))
			for _, req := range []string{"", "req-1"} {
				id := "wrong-type" + req
				key := p.Keys(id, "")[0]
				if err := rdb.HSet(ctx, key, "f", "v").Err(); err != nil {
					t.Fatal(err)
				}
				d := mustCheck(t, l, p, Request{Identity: id, RequestID: req})
				if !d.Allowed || d.Remaining != 4 {
					t.Fatalf("request id %q over a hash: %+v, want admitted with 4 left", req, d)
				}
				if typ := rdb.Type(ctx, key).Val(); typ != "string" {
					t.Fatalf("request id %q: state key is a %s after the admission, want a string", req, typ)
				}
			}
		})
	}
}

// TestSingleLimitAdmissionIsOneInteger: the common call's admission is answered with one
// integer (no reply table for Redis to build), and a denial with the full table.
func TestSingleLimitAdmissionIsOneInteger(t *testing.T) {
	_, rdb := standalone(t)
	ctx := context.Background()
	for _, alg := range algorithms {
		p := newPolicy(t, alg, FailOpen, perHour("hourly", 1))
		keys, args := p.Keys("a", ""), p.Args(Request{Identity: "a", Cost: 1})
		v, err := evalOne(ctx, rdb, p.Script(), keys, args)
		if _, ok := v.(int64); err != nil || !ok {
			t.Errorf("%s: admission replied %T %v (%v), want one integer", alg, v, v, err)
		}
		v, err = evalOne(ctx, rdb, p.Script(), keys, args)
		if _, ok := v.([]any); err != nil || !ok {
			t.Errorf("%s: denial replied %T %v (%v), want a table", alg, v, v, err)
		}
	}
}

// TestDecodeIntegerReply: the integer reply decodes to the admission it encodes; an integer
// that is not a fresh admission is refused.
func TestDecodeIntegerReply(t *testing.T) {
	p, err := NewPolicy(Spec{Namespace: "test", Name: "decode", Algorithm: GCRA,
		Limits:   []Limit{{Name: "a", Requests: 10, Period: time.Second}, {Name: "b", Requests: 100, Period: time.Minute}},
		StateKey: testTemplate, TTL: time.Hour, FailureMode: FailOpen})
	if err != nil {
		t.Fatal(err)
	}
	code := int64(1 + 4*2 + 64*77)
	d, err := decodeReply(p, code+1234<<intReplyShift)
	want := Decision{Allowed: true, Remaining: 77, Limit: 100, ResetAfter: 1234 * time.Millisecond, LimitName: "b", Source: SourceRedis}
	if err != nil || d != want {
		t.Fatalf("decode: %+v, %v; want %+v", d, err, want)
	}
	for _, bad := range []int64{-1, 4 + 64, 1 + 2 + 4, 1, 1 + 4*3} {
		if _, err := decodeReply(p, bad); err == nil || !strings.Contains(err.Error(), "script") {
			t.Errorf("decode %d: err %v, want an error", bad, err)
		}
	}
}
