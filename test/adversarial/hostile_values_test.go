package adversarial

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// Issue 39, item 1 (the class): a tenant's Redis user may SET any value under its own prefix
// (the scripts write there with its rights), so every value a script reads from such a key
// is hostile: of any size, any shape, any type. docs/security.md has the table of key kinds,
// the shapes each script accepts and the most it reads; this test writes hostile values to
// every row of it and calls every function that reads it as the tenant does (FCALL with its
// own user, on the tenant rig's Redis configured as docs/operations.md asks), asserting:
//   - bounded Redis time per call: the least of three tries (each on a freshly written
//     value, so a preempted redis-server cannot fail it) under hostileCallBound, whatever
//     the value; a script that read a value of hostileSize whole would take 3 times that,
//     and one that looped over it far longer (the record of item 1 held Redis 230 ms per
//     call at 1 MiB);
//   - no over-admission: a hostile value is no state of ours, so it counts as fresh (or
//     holds nothing, or is refused): never more than the limit is admitted after it, and a
//     record a script refuses changes no counter.

// hostileLimit is the limit of every hostile policy.
const hostileLimit = 5

// hostileValue is one value no script of ours writes, for a key kind.
type hostileValue struct {
	name string
	// value is what the tenant SETs; list, when true, makes the key a list instead (an
	// administrator's mistake: a tenant's user has no list command).
	value string
	list  bool
}

// hostileValues are the hostile values of a key kind whose own values of ours are like good:
// far too long (good repeated), one byte short and one too long, the right length with NaN
// and infinities where the numbers go, and a key of another type.
func hostileValues(good string) []hostileValue {
	nan := make([]byte, len(good))
	for i := 0; i+8 <= len(nan); i += 8 {
		bits := math.Float64bits(math.NaN())
		if i/8%2 == 1 {
			bits = math.Float64bits(math.Inf(1))
		}
		binary.LittleEndian.PutUint64(nan[i:], bits)
	}
	return []hostileValue{
		{name: "1 MiB", value: strings.Repeat(good, hostileSize/len(good))},
		{name: "a byte short", value: good[:len(good)-1]},
		{name: "a byte long", value: good + "1"},
		{name: "NaN and infinities", value: string(nan)},
		{name: "a list", list: true},
	}
}

// hostileRig is one tenant's policies on the tenant rig, called as the tenant calls them.
type hostileRig struct {
	t     *testing.T
	ts    *tenants
	admin redis.UniversalClient // the server's default user: writes a list where asked
	own   redis.UniversalClient // the tenant's own user
	lim   *limiter.Limiter
}

func newHostileRig(t *testing.T) *hostileRig {
	t.Helper()
	ts := newTenants(t, ns, attackerNS)
	own := ts.of(attackerNS)
	lim, err := limiter.New(own, limiter.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	return &hostileRig{t: t, ts: ts, admin: ts.srv.Client(), own: own, lim: lim}
}

// policy is a tenant policy of alg, hostileLimit per hour, called as functions, with
// idempotency, settlements and, when most > 0, a concurrency limit of most.
func (h *hostileRig) policy(alg limiter.Algorithm, name string, most int64) *limiter.Policy {
	h.t.Helper()
	s := limiter.Spec{Namespace: attackerNS, Name: name, Algorithm: alg,
		Limits:   []limiter.Limit{{Name: "hour", Requests: hostileLimit, Period: time.Hour}},
		StateKey: "{rl:attacker/" + name + ":${identity}}:${limit}", TTL: 2 * time.Hour, FailureMode: limiter.FailOpen,
		IdempotencyKey: "{rl:attacker/" + name + ":${identity}}:idem:${requestId}", IdempotencyTTL: time.Minute,
		Functions: true, KeepUsage: true}
	if most > 0 {
		s.Concurrency = &limiter.Concurrency{Max: most, SlotTTL: time.Hour}
		s.IdempotencyKey, s.IdempotencyTTL = "", 0
	} else {
		s.Settle = limiter.DefaultSettle
	}
	p, err := limiter.NewPolicy(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// write puts v at key: as the tenant (SET), or as a list through the default user.
func (h *hostileRig) write(key string, v hostileValue) {
	h.t.Helper()
	ctx := context.Background()
	if err := h.admin.Del(ctx, key).Err(); err != nil {
		h.t.Fatal(err)
	}
	var err error
	if v.list {
		err = h.admin.RPush(ctx, key, "a", "b", "c").Err()
	} else {
		err = h.own.Set(ctx, key, v.value, time.Hour).Err()
	}
	if err != nil {
		h.t.Fatalf("write %s at %s: %v", v.name, key, err)
	}
}

// redisTime is the Redis time (µs) the server has spent in FCALL and FCALL_RO so far.
func (h *hostileRig) redisTime() int64 {
	h.t.Helper()
	return fcallTime(h.t, h.admin)
}

// bounded writes v at key and runs call three times (v written afresh before each), and
// requires the least Redis time a call took to be under hostileCallBound; it returns the
// last call's error.
func (h *hostileRig) bounded(what, key string, v hostileValue, call func() error) error {
	h.t.Helper()
	least := time.Hour
	var err error
	for range 3 {
		h.write(key, v)
		before := h.redisTime()
		err = call()
		least = min(least, time.Duration(h.redisTime()-before)*time.Microsecond)
	}
	h.t.Logf("%s on %s: %s", what, v.name, least)
	if least > hostileCallBound {
		h.t.Errorf("%s on %s: the call held Redis %s at least (3 tries), over %s", what, v.name, least, hostileCallBound)
	}
	return err
}

// admitted checks identity n times at cost 1 (with requestID, when set) and counts the
// admissions Redis made; a failure mode's answer fails the test.
func (h *hostileRig) admitted(p *limiter.Policy, identity, requestID string, n int) int {
	h.t.Helper()
	ok := 0
	for range n {
		d := h.lim.Check(context.Background(), p, limiter.Request{Identity: identity, RequestID: requestID, Slot: slotFor(p)})
		if d.WithoutRedis() {
			h.t.Fatalf("%s: a check fell to the failure mode: %v", identity, d.Err)
		}
		if d.Allowed {
			ok++
		}
	}
	return ok
}

// slotFor is a fresh slot for a policy with a concurrency limit, else none.
func slotFor(p *limiter.Policy) string {
	if p.Concurrency == nil {
		return ""
	}
	return limiter.NewID()
}

// remaining is what a peek says identity has left on p's one limit.
func (h *hostileRig) remaining(p *limiter.Policy, identity string) int64 {
	h.t.Helper()
	pk := h.lim.Peek(context.Background(), p, limiter.Request{Identity: identity})
	if pk.WithoutRedis() || len(pk.Limits) == 0 {
		h.t.Fatalf("peek %s: %v", identity, pk.Err)
	}
	return pk.Limits[0].Remaining
}

// goodState is a state value of ours for alg: what one admission at cost 1 writes.
func (h *hostileRig) goodState(p *limiter.Policy) string {
	h.t.Helper()
	id := "good-" + limiter.NewID()
	h.admitted(p, id, "", 1)
	v, err := h.admin.Get(context.Background(), p.Keys(id, "")[0]).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// TestHostileValuesInEveryKeyKind: every row of docs/security.md's table of key kinds, every
// function that reads it, called as the tenant on hostile values: bounded Redis time per
// call, and never more admitted than the limit.
func TestHostileValuesInEveryKeyKind(t *testing.T) {
	h := newHostileRig(t)
	algs := []limiter.Algorithm{limiter.TokenBucket, limiter.SlidingWindow, limiter.FixedWindow, limiter.GCRA}
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			h.t = t
			p := h.policy(alg, "hostile-"+strings.ToLower(string(alg)), 0)
			slots := h.policy(alg, "hostile-slots-"+strings.ToLower(string(alg)), 3)
			h.stateRows(p, slots)
			h.idempotencyRow(p)
			h.recordRows(p)
			h.leaseRow(alg, p)
			h.slotsRow(slots)
		})
	}
}

// stateRows: a state key holding a hostile value is read by a check, a peek, an adjustment,
// a settlement, an acquire and a lease as fresh state: none admits beyond the limit.
func (h *hostileRig) stateRows(p, slots *limiter.Policy) {
	ctx := context.Background()
	for _, v := range hostileValues(h.goodState(p)) {
		id := "state-" + limiter.NewID()
		key := p.Keys(id, "")[0]
		_ = h.bounded("a check", key, v, func() error {
			h.lim.Check(ctx, p, limiter.Request{Identity: id})
			return nil
		})
		h.write(key, v)
		if got := h.admitted(p, id, "", 2*hostileLimit); got > hostileLimit {
			h.t.Errorf("state %s: %d admitted after it, over the limit of %d", v.name, got, hostileLimit)
		}
		_ = h.bounded("a peek", key, v, func() error { h.lim.Peek(ctx, p, limiter.Request{Identity: id}); return nil })
		_ = h.bounded("a refund", key, v, func() error {
			_, err := h.lim.Adjust(ctx, p, limiter.Adjustment{Op: limiter.OpRefund, Identity: id, Amount: 1, RequestID: limiter.NewID()})
			return err
		})
		_ = h.bounded("a settlement", key, v, func() error {
			r, err := h.lim.Reserve(ctx, p, id, 1, 0)
			if err != nil {
				return err
			}
			_, err = h.lim.Settle(ctx, p, limiter.Settlement{Identity: id, Reservation: r, Cost: 0})
			return err
		})
		skey := slots.Keys(id, "")[0]
		_ = h.bounded("an acquire", skey, v, func() error {
			h.lim.Check(ctx, slots, limiter.Request{Identity: id, Slot: limiter.NewID()})
			return nil
		})
		_ = h.bounded("a lease", key, v, func() error { _, err := h.lease(p, id, "-1", ""); return err })
		h.write(key, v)
		if got := h.admitted(p, id, "", 2*hostileLimit); got > hostileLimit {
			h.t.Errorf("state %s then a lease: %d admitted, over the limit of %d", v.name, got, hostileLimit)
		}
	}
}

// idempotencyRow: a request id whose record is hostile replays nothing: each check under it
// is a new request, and no more than the limit is admitted.
func (h *hostileRig) idempotencyRow(p *limiter.Policy) {
	ctx := context.Background()
	good := string(make([]byte, 24)) + strings.Repeat("f", 16)
	for _, v := range hostileValues(good) {
		id, req := "idem-"+limiter.NewID(), limiter.NewID()
		keys := p.Keys(id, req)
		key := keys[len(keys)-1]
		_ = h.bounded("an idempotent check", key, v, func() error {
			h.lim.Check(ctx, p, limiter.Request{Identity: id, RequestID: req})
			return nil
		})
		h.write(key, v)
		if got := h.admitted(p, id, req, 2*hostileLimit); got > hostileLimit {
			h.t.Errorf("idempotency record %s: %d admitted under its id, over the limit of %d", v.name, got, hostileLimit)
		}
	}
}

// recordRows: a settlement's record (the reservation) or an adjustment's of a hostile value
// is refused, and the counters stay as they were.
func (h *hostileRig) recordRows(p *limiter.Policy) {
	ctx := context.Background()
	good := strings.Repeat("r", 16) + string(make([]byte, 32))
	for _, v := range hostileValues(good) {
		id, req, reservation := "record-"+limiter.NewID(), limiter.NewID(), limiter.NewID()
		h.admitted(p, id, "", 2)
		before := h.remaining(p, id)
		err := h.bounded("a settlement", p.Keys(id, "")[0]+":settle:"+reservation, v, func() error {
			_, err := h.lim.Settle(ctx, p, limiter.Settlement{Identity: id, Reservation: reservation, Cost: 0})
			return err
		})
		if err == nil {
			h.t.Errorf("reservation record %s: the settlement was applied", v.name)
		}
		err = h.bounded("an adjustment", p.Keys(id, "")[0]+":adjust:"+recordHash(req), v, func() error {
			_, err := h.lim.Adjust(ctx, p, limiter.Adjustment{Op: limiter.OpRefund, Identity: id, Amount: 1, RequestID: req})
			return err
		})
		if after := h.remaining(p, id); err == nil || after != before {
			h.t.Errorf("records %s: %v, %d remaining before, %d after: want refused, no change", v.name, err, before, after)
		}
	}
}

// lease calls alg's lease function as the tenant: 3 units wanted for identity, returning
// the lease recorded at prev (index next; "-1": none).
func (h *hostileRig) lease(p *limiter.Policy, identity, next, prev string) ([]int64, error) {
	h.t.Helper()
	fn := p.LeaseScript().Function
	limit := []any{strconv.Itoa(hostileLimit), strconv.FormatInt(time.Hour.Microseconds(), 10)}
	if p.Algorithm == limiter.TokenBucket || p.Algorithm == limiter.GCRA {
		limit = []any{strconv.FormatInt((time.Hour / hostileLimit).Microseconds(), 10), strconv.Itoa(hostileLimit), "keep"}
	}
	keys := []string{p.Keys(identity, "")[0], p.Keys(identity, "")[0] + ":lease:new"}
	if prev != "" {
		keys = append(keys, prev)
	}
	args := append([]any{"3", "7200000", "1", next, "1"}, limit...)
	v, err := h.own.FCall(context.Background(), fn, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	out := make([]int64, len(r))
	for i, x := range r {
		out[i], _ = x.(int64)
	}
	return out, nil
}

// leaseRow: a previous lease's record of a hostile value returns nothing.
func (h *hostileRig) leaseRow(alg limiter.Algorithm, p *limiter.Policy) {
	good := string(make([]byte, 8+24))
	for _, v := range hostileValues(good) {
		id := "lease-" + limiter.NewID()
		prev := p.Keys(id, "")[0] + ":lease:prev"
		h.admitted(p, id, "", hostileLimit)
		_ = h.bounded("a lease returning a previous one", prev, v, func() error {
			out, err := h.lease(p, id, "0", prev)
			if err == nil && len(out) > 1 && out[1] != 0 {
				h.t.Errorf("%s: lease record %s: %d units returned, want none", alg, v.name, out[1])
			}
			return err
		})
		if got := h.admitted(p, id, "", hostileLimit); got > 0 {
			h.t.Errorf("%s: lease record %s: %d more admitted after the limit was spent", alg, v.name, got)
		}
	}
}

// slotsRow: an identity's slots of a hostile value hold no slot: at most the concurrency
// limit is admitted after it, and a release of any id gives nothing back.
func (h *hostileRig) slotsRow(p *limiter.Policy) {
	ctx := context.Background()
	good := strings.Repeat("\x43\x00\x00\x00\x00\x00\x00\x00\x3f\xf0\x00\x00\x00\x00\x00\x00", 32) // a ring: 32 buckets of '>dd'
	for _, v := range hostileValues(good) {
		id := "slots-" + limiter.NewID()
		key := strings.TrimSuffix(p.Keys(id, "")[0], "hour") + "@slots:slots"
		_ = h.bounded("an acquire", key, v, func() error {
			h.lim.Check(ctx, p, limiter.Request{Identity: id, Slot: limiter.NewID()})
			return nil
		})
		_ = h.bounded("a release", key, v, func() error {
			held, err := h.lim.Release(ctx, p, id, limiter.NewID())
			if held {
				h.t.Errorf("slots %s: a release of an id never taken gave a slot back", v.name)
			}
			return err
		})
		_ = h.bounded("a peek", key, v, func() error { h.lim.Peek(ctx, p, limiter.Request{Identity: id}); return nil })
		h.write(key, v)
		if got := h.admitted(p, id, "", 2*int(p.Concurrency.Max)); got > int(p.Concurrency.Max) {
			h.t.Errorf("slots %s: %d in flight admitted, over the concurrency limit of %d", v.name, got, p.Concurrency.Max)
		}
	}
}
