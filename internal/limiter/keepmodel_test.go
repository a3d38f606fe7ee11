package limiter

import (
	"context"
	"encoding/binary"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The reference for keep-usage (Spec.KeepUsage) tests: a model of the scripts' decisions
// with the documented rounding (keepBucketModel, and the window models of
// scriptcost_test.go with their requests changed), and exactRule, the rule without any
// rounding, against which over-admission is measured.

// keepBucketModel is TokenBucket and GCRA with keep-usage, in exact integers: the time the
// bucket is full again and the T it was written at. A read at another T rescales the debt
// as keep_usage.lua documents (whole tokens exactly, the partial token's µs rounded up, one
// µs more where its doubles cannot be exact, at most burst * T), and the rescaled state is
// kept even when the check denies, unless the debt was capped (burst tokens or more): then
// the state stays as it was, the whole debt at the T it was written at.
type keepBucketModel struct {
	T, burst int64
	at, T0   int64
	has      bool
}

// two53 is 2^53, below which the scripts' doubles hold integers exactly.
const two53 = 1 << 53

// rescaledDebt is d µs owed at T0 per token, owed at T per token: keep_usage.lua's rule;
// capped when the debt is burst tokens or more (an empty bucket, less than the debt).
func rescaledDebt(d, T0, T, burst int64) (debt int64, capped bool) {
	k, rem := d/T0, d%T0
	if k >= burst {
		return burst * T, true
	}
	p := new(big.Int).Mul(big.NewInt(rem), big.NewInt(T))
	var part int64
	if p.Cmp(big.NewInt(two53)) < 0 {
		part = (p.Int64() + T0 - 1) / T0
	} else {
		prod := float64(rem) * float64(T)
		part = int64(math.Ceil(prod/float64(T0))) + 1
	}
	return min(k*T+part, burst*T), false
}

// read is the time the bucket is full again at now, under the current T, clamped as the
// scripts clamp it; rescaled when the stored value was written at another T, capped when
// its debt did not fit this capacity.
func (m *keepBucketModel) read(now int64) (full int64, rescaled, capped bool) {
	full = now
	switch {
	case !m.has:
	case m.T0 == m.T:
		full = max(m.at, now)
	case m.at > now:
		var d int64
		d, capped = rescaledDebt(m.at-now, m.T0, m.T, m.burst)
		full, rescaled = now+d, true
	}
	return min(full, now+m.burst*m.T), rescaled, capped
}

func (m *keepBucketModel) check(nowf, costf float64) (bool, float64, float64, float64, func()) {
	now, cost := int64(nowf), int64(costf)
	full, rescaled, capped := m.read(now)
	// Written back whatever the decision (an admission then writes over it), unless capped:
	// then the call denies (the bucket is empty) and the state keeps the whole debt.
	if rescaled && !capped {
		m.at, m.T0 = full, m.T
	}
	limitCap, used := m.burst*m.T, full-now
	after := used + cost*m.T
	left := float64((limitCap - used) / m.T)
	switch {
	case cost > m.burst:
		return false, left, -1, float64(used), nil
	case after > limitCap:
		return false, left, float64(after - limitCap), float64(used), nil
	}
	return true, float64((limitCap - after) / m.T), 0, float64(after), func() { m.at, m.T0, m.has = now+after, m.T, true }
}

// newKeepModel is the reference model of a keep-usage policy.
func newKeepModel(p *Policy) *policyModel {
	m := &policyModel{p: p}
	for _, l := range p.Limits {
		if p.Algorithm == TokenBucket || p.Algorithm == GCRA {
			m.limits = append(m.limits, &keepBucketModel{T: interval(l), burst: burstOf(p.Algorithm, l)})
		} else {
			m.limits = append(m.limits, newLimitModel(p.Algorithm, l))
		}
	}
	return m
}

// rerate switches the model to p: the same limits (names, periods, order) at other rates.
func rerate(m *policyModel, p *Policy) {
	m.p = p
	for i, l := range p.Limits {
		switch x := m.limits[i].(type) {
		case *keepBucketModel:
			x.T, x.burst = interval(l), burstOf(p.Algorithm, l)
		case *fixedModel:
			x.requests = float64(l.Requests)
		case *slidingModel:
			x.requests = float64(l.Requests)
		}
	}
}

// exactRule is one limit's keep-usage rule without rounding: what a caller may be admitted.
// Buckets: the tokens used, an exact fraction, never capped (usage carried in tokens: a debt
// beyond the capacity in force is more than an empty bucket, denied until it refills below
// the burst), refilling at the rate the state was written at (per). The scripts choose that
// rate: an admission, or a read at another rate whose debt fits the capacity, writes the
// rate in force; a read that caps writes nothing, so the old rate goes on. follow takes it
// from the stored state after each call; the over-admission the tests count is then the
// rounding's alone, and the rate a capped read leaves is checked by the model and the
// figures. Windows: the requests counted per aligned window, whatever rate counted them, and
// the rule of the algorithm in force over them.
type exactRule struct {
	alg    Algorithm
	l      Limit
	used   *big.Rat
	per    int64 // µs per token at which used refills
	last   int64
	counts map[int64]int64
}

func newExactRule(alg Algorithm, l Limit, now int64) *exactRule {
	return &exactRule{alg: alg, l: l, used: new(big.Rat), per: interval(l), last: now, counts: map[int64]int64{}}
}

func (e *exactRule) bucket() bool { return e.alg == TokenBucket || e.alg == GCRA }

// advance refills a bucket up to now.
func (e *exactRule) advance(now int64) {
	if !e.bucket() || now <= e.last {
		return
	}
	e.used.Sub(e.used, big.NewRat(now-e.last, e.per))
	if e.used.Sign() < 0 {
		e.used.SetInt64(0)
	}
	e.last = now
}

// rerate puts l (the same limit at another rate) in force at now: its capacity from now on;
// the usage keeps refilling at per until a call writes another rate (see follow).
func (e *exactRule) rerate(l Limit, now int64) {
	e.advance(now)
	e.l = l
}

// follow makes a bucket's usage refill, from now on, at the rate its state records after a
// call at now: value is the state key's value, a keep-usage '>dd' (time, T) or anything
// else (absent, an integer: no change).
func (e *exactRule) follow(now int64, value string) {
	if !e.bucket() || len(value) != 16 {
		return
	}
	e.advance(now)
	if T := int64(math.Float64frombits(binary.BigEndian.Uint64([]byte(value[8:])))); T >= 1 {
		e.per = T
	}
}

// followState is follow for every rule of a policy's limits, reading the identity's state
// keys after a call at now.
func followState(t testing.TB, rdb redis.UniversalClient, p *Policy, identity string, now int64, rules []*exactRule) {
	t.Helper()
	vals, err := rdb.MGet(context.Background(), p.Keys(identity, "")[:len(p.Limits)]...).Result()
	if err != nil {
		t.Fatalf("reading the state of %s: %v", identity, err)
	}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			rules[i].follow(now, s)
		}
	}
}

// estimate is what a bucket or a fixed window counts at now before a request: the tokens
// used, or the window's count.
func (e *exactRule) estimate(now int64) *big.Rat {
	if e.bucket() {
		e.advance(now)
		return new(big.Rat).Set(e.used)
	}
	return new(big.Rat).SetInt64(e.counts[now/e.l.Period.Microseconds()])
}

// sliding is the SlidingWindow estimate at now over the counts, in doubles in the script's
// order of operations: the algorithm's own definition, so compared as the script compares.
func (e *exactRule) sliding(now int64) float64 {
	period := e.l.Period.Microseconds()
	w := now / period
	return float64(e.counts[w-1])*float64(period-now%period)/float64(period) + float64(e.counts[w])
}

// size is the limit's capacity in force.
func (e *exactRule) size() int64 { return burstOf(e.alg, e.l) }

// allows reports whether the rule admits cost at now.
func (e *exactRule) allows(now, cost int64) bool {
	if e.alg == SlidingWindow {
		return e.sliding(now)+float64(cost) <= float64(e.size())
	}
	need := new(big.Rat).Add(e.estimate(now), new(big.Rat).SetInt64(cost))
	return need.Cmp(new(big.Rat).SetInt64(e.size())) <= 0
}

// remaining is what the rule leaves at now, in whole units, never below 0.
func (e *exactRule) remaining(now int64) int64 {
	if e.alg == SlidingWindow {
		return int64(math.Floor(math.Max(0, float64(e.size())-e.sliding(now))))
	}
	left := new(big.Rat).Sub(new(big.Rat).SetInt64(e.size()), e.estimate(now))
	if left.Sign() <= 0 {
		return 0
	}
	return new(big.Int).Quo(left.Num(), left.Denom()).Int64()
}

// admit records cost admitted at now.
func (e *exactRule) admit(now, cost int64) {
	if e.bucket() {
		e.advance(now)
		e.used.Add(e.used, new(big.Rat).SetInt64(cost))
		e.per = interval(e.l) // an admission writes the rate in force
		return
	}
	e.counts[now/e.l.Period.Microseconds()] += cost
}

// keepDay is the period of the figures.
const keepDay = 24 * time.Hour
