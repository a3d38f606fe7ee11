package limiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// Bounds of a concurrency limit.
const (
	// MaxConcurrency is the most slots a concurrency limit holds at once.
	MaxConcurrency = 1000
	// MinSlotTTL is the shortest a slot lives without being given back.
	MinSlotTTL = time.Second
	// MaxSlotTTL is the longest a slot lives without being given back.
	MaxSlotTTL = 24 * time.Hour
	// ConcurrencyLimitName names the concurrency limit in decisions (LimitName, DeniedBy); a
	// policy with a concurrency limit may not give a limit of its own this name.
	ConcurrencyLimitName = "in-flight"
)

// Concurrency is a concurrency limit: at most Max requests of one identity in flight at once,
// each holding a slot in Redis from its admission until it is released, or about SlotTTL.
// The slots of an identity are counted in a ring of buckets by expiry (acquire.lua says
// why), so a check costs the same whatever the slots held.
type Concurrency struct {
	// Max is the most requests in flight at once (1 to MaxConcurrency).
	Max int64
	// SlotTTL is how long a slot lives when its request never says it ended (a crashed
	// sidecar): it comes back by itself then, at most SlotTTL/30 later (the ring's bucket;
	// MinSlotTTL to MaxSlotTTL, whole ms).
	SlotTTL time.Duration
}

// checkConcurrency says what is wrong with c's concurrency limit, naming the field.
func checkConcurrency(c Spec) FieldErrors {
	var errs FieldErrors
	cc := c.Concurrency
	if cc == nil {
		return nil
	}
	if cc.Max < 1 || cc.Max > MaxConcurrency {
		errs.add("concurrency.max", "%d is not from 1 to %d", cc.Max, MaxConcurrency)
	}
	if cc.SlotTTL < MinSlotTTL || cc.SlotTTL > MaxSlotTTL || cc.SlotTTL%time.Millisecond != 0 {
		errs.add("concurrency.slotTTL", "%s is not a whole number of ms from %s to %s", cc.SlotTTL, MinSlotTTL, MaxSlotTTL)
	}
	for i, l := range c.Limits {
		if l.Name == ConcurrencyLimitName {
			errs.add(fmt.Sprintf("limits[%d].name", i), "%q names the concurrency limit in decisions and headers; choose another name", l.Name)
		}
	}
	for _, clash := range []struct {
		on    bool
		field string
	}{
		{c.Leases, "hotKeys.leases: a lease admits without Redis, so without a slot"},
		{c.Shards > 1, "hotKeys.shards: the slots of one identity must live on one slot of Redis Cluster"},
		{c.IdempotencyKey != "", "idempotency: a replayed admission would take no slot, and its release would free another's"},
	} {
		if clash.on {
			errs.add("concurrency", "cannot be combined with %s", clash.field)
		}
	}
	return errs
}

// SlotIDLength is the length of a slot id: NewID's, and what Release takes.
const SlotIDLength = 32

// NewID is a fresh random id (16 random bytes, hex: SlotIDLength bytes): a request's slot,
// or a reservation to settle.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return hex.EncodeToString(b[:])
}

// slotsLimit stands for ${limit} in an identity's slots key: no limit is named so (limit
// names are DNS labels), so the key is no limit's state key, and it is the same whatever
// the tier or override (whose limits differ) the caller's request counts against.
const slotsLimit = "@slots"

// slotsKey is the key of an identity's slots: the state key template expanded with
// slotsLimit, then ":slots" (so a template without ${limit} names another key too), under
// the same hash tag and key scope as the state keys.
func (p *Policy) slotsKey(identity string) string {
	return p.state.Expand(&keylayout.Values{Namespace: p.Namespace, Policy: p.Name, Identity: identity, Limit: slotsLimit}) + ":slots"
}

// slotKeys are the keys of one slot: the identity's slots (the ring), then the slot's own.
func (p *Policy) slotKeys(identity, slot string) []string {
	ring := p.slotsKey(identity)
	return []string{ring, ring + ":" + slot}
}

// acquire is Check of a policy with a concurrency limit: the rate limits and a slot, in one
// script call, never from a lease or the deny cache (a slot may come back at any moment).
// r.Slot names the slot; an admission holds it until Release.
func (l *Limiter) acquire(ctx context.Context, p *Policy, r Request) Decision {
	if !IsID(r.Slot) {
		return Decision{Source: SourceFailClosed, Err: fmt.Errorf("slot: a check of a concurrency limit needs a slot id of %d hexadecimal digits", SlotIDLength)}
	}
	keys := append(p.Keys(r.Identity, ""), p.slotKeys(r.Identity, r.Slot)...)
	b := l.breakerFor(ctx, keys[0])
	if !b.allow() {
		l.stats.circuitOpen.Add(1)
		return l.fallback(p, r, ErrCircuitOpen, b)
	}
	call := func(at time.Time) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
		return evalOne(ctx, l.rdb, p.acquireScript, keys, p.acquireArgs(r, at))
	}
	v, err := l.atServerTime(p, call)
	if err != nil {
		l.failed(ctx, b, err)
		return l.fallback(p, r, fmt.Errorf("policy %s/%s: %w", p.Namespace, p.Name, err), b)
	}
	b.success()
	d, err := decodeAcquired(p, v)
	if err != nil {
		l.stats.count(KindCall)
		return l.fallback(p, r, fmt.Errorf("%w: %w", errBadReply, err), b)
	}
	return d
}

// acquireArgs is ARGV of an acquire of r at server time at: cost, the state TTL, the most
// slots and their TTL, then the rate limits as a check's.
func (p *Policy) acquireArgs(r Request, at time.Time) []any {
	args := p.buildArgs(max(r.Cost, 1), "")
	limits := args[3:]
	if p.calendars != nil {
		p.calendars.fill(limits[:len(p.limitArg)], at)
	}
	out := make([]any, 0, 4+len(limits))
	out = append(out, args[0], p.ttlMS, strconv.FormatInt(p.Concurrency.Max, 10),
		strconv.FormatInt(p.Concurrency.SlotTTL.Milliseconds(), 10))
	return append(out, limits...)
}

// decodeAcquired is decodeReply for the acquire script, whose index one past the rate
// limits names the concurrency limit.
func decodeAcquired(p *Policy, v any) (Decision, error) {
	r, ok := v.([]any)
	var n [3]int64
	if !ok || len(r) != 3 {
		return Decision{}, fmt.Errorf("script %s: unexpected reply %v", p.acquireScript.Name, v)
	}
	if err := replyInts(p.acquireScript, r, n[:]); err != nil {
		return Decision{}, err
	}
	if idx := int(n[0]>>2&15) - 1; idx != len(p.Limits) {
		return decodeReply(p, v)
	}
	d := Decision{Allowed: n[0]&1 == 1, Remaining: n[0] >> 6, Limit: p.Concurrency.Max,
		RetryAfter: time.Duration(n[1]) * time.Millisecond, ResetAfter: time.Duration(n[2]) * time.Millisecond,
		LimitName: ConcurrencyLimitName, Source: SourceRedis}
	if !d.Allowed {
		d.DeniedBy = ConcurrencyLimitName
	}
	return d, nil
}

// Release gives back the slot an admission of identity took under p (Request.Slot), when
// its request ends. Idempotent: it reports whether the slot was still held (false when it
// was released before or had expired).
func (l *Limiter) Release(ctx context.Context, p *Policy, identity, slot string) (bool, error) {
	if p.Concurrency == nil {
		return false, fmt.Errorf("policy %s/%s has no concurrency limit", p.Namespace, p.Name)
	}
	if !IsID(slot) {
		return false, fmt.Errorf("slot: %d hexadecimal digits, got %d bytes", SlotIDLength, len(slot))
	}
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s := releaseScript
	if p.Functions {
		s = s.asFunction()
	}
	v, err := evalOne(ctx, l.rdb, s, p.slotKeys(identity, slot), nil)
	if err != nil {
		return false, fmt.Errorf("release a slot of policy %s/%s: %w", p.Namespace, p.Name, err)
	}
	n, ok := v.(int64)
	if !ok {
		return false, fmt.Errorf("script %s: unexpected reply %v", s.Name, v)
	}
	return n == 1, nil
}
