package limiter

import (
	"context"
	"fmt"
	"time"
)

// LimitState is one limit of a policy for one identity, as a peek read it from Redis.
type LimitState struct {
	// Name is the limit's name.
	Name string
	// Limit is its size: burst for TokenBucket and GCRA, requests for the windows (for a
	// sharded policy, the whole limit).
	Limit int64
	// Remaining is what it holds now, before any request (for a sharded policy, the sum of
	// the shards').
	Remaining int64
	// ResetAfter is how long until it is full again; for the windows, until the window
	// holding the usage ends (for a sharded policy, the latest shard's).
	ResetAfter time.Duration
	// RetryAfter is how long a request of the peeked cost would wait on this limit: 0 when
	// it would pass now, negative when never.
	RetryAfter time.Duration
}

// Used is what the identity has used of the limit: Limit - Remaining, never below 0.
func (s LimitState) Used() int64 { return max(0, s.Limit-s.Remaining) }

// Peek is the answer to a check that debits nothing.
type Peek struct {
	// Decision is what a check of the peeked request would decide now: Allowed, the reported
	// limit (the tightest when allowed, the denying one when denied) with what it holds now
	// (Remaining before the request, unlike a check's), RetryAfter, ResetAfter. Source is
	// SourceRedis, or the failure mode's when Redis could not be asked (then Limits is
	// empty and Err says why).
	Decision
	// Limits is every limit of the policy, in the policy's order, then for a policy with a
	// concurrency limit its slots (ConcurrencyLimitName: Limit the most in flight, Remaining
	// the slots free now).
	Limits []LimitState
}

// Peek reports what a check of r would decide now, and what each of the policy's limits
// holds for r.Identity, without debiting anything: the peek script writes nothing, takes no
// lease, records no request id, and the deny cache and leases are neither read nor fed. Units
// leased to sidecars and not yet spent count as used (Redis holds them debited). r.Cost is
// the cost decided (0: none, a plain read); r.RequestID is ignored. A sharded policy is
// peeked on every shard and reported whole: remaining summed, admitted when a shard would
// admit (as a check tries each in turn).
func (l *Limiter) Peek(ctx context.Context, p *Policy, r Request) Peek {
	r.Cost, r.RequestID = max(r.Cost, 0), ""
	if p.shards == nil {
		return l.peekOne(ctx, p, r)
	}
	ids := p.shards.identities(r.Identity)
	parts := make([]Peek, len(ids))
	for i, id := range ids {
		sr := r
		sr.Identity = id
		if parts[i] = l.peekOne(ctx, p.shards.parts[i], sr); parts[i].WithoutRedis() {
			return parts[i]
		}
	}
	return p.wholePeek(parts)
}

// peekOne is Peek of a policy that is not sharded (or one shard of one).
func (l *Limiter) peekOne(ctx context.Context, p *Policy, r Request) Peek {
	keys := p.Keys(r.Identity, "")
	if p.Concurrency != nil {
		keys = append(keys, p.slotsKey(r.Identity))
	}
	b := l.breakerFor(ctx, keys[0])
	if !b.allow() {
		l.stats.circuitOpen.Add(1)
		return p.peekWithoutRedis(r, ErrCircuitOpen, l.opts.Now)
	}
	call := func(at time.Time) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
		return evalOne(ctx, l.rdb, p.peekScript, keys, p.peekArgs(r.Cost, at))
	}
	v, err := l.atServerTime(p, call)
	if err != nil {
		l.failed(ctx, b, err)
		return p.peekWithoutRedis(r, fmt.Errorf("policy %s/%s: %w", p.Namespace, p.Name, err), l.opts.Now)
	}
	b.success()
	out, err := decodePeek(p, v)
	if err != nil {
		l.stats.count(KindCall)
		return p.peekWithoutRedis(r, fmt.Errorf("%w: %w", errBadReply, err), l.opts.Now)
	}
	return out
}

// atServerTime runs call at the server's time as the limiter knows it, for a policy with
// calendar limits: when the script answers that the server clock is outside a window given,
// it calls again at the time the server gave, at most twice (nothing was read or written).
// Without calendar limits the time is not read.
func (l *Limiter) atServerTime(p *Policy, call func(at time.Time) (any, error)) (any, error) {
	if p.calendars == nil {
		return call(time.Time{})
	}
	v, err := call(l.Now())
	for again := 0; err == nil && again < 2; again++ {
		at, stale := staleWindow(v)
		if !stale {
			break
		}
		l.learnClock(at)
		v, err = call(at)
	}
	return v, err
}

// peekArgs is ARGV of a peek of cost at server time at: a check's, without idempotency.
func (p *Policy) peekArgs(cost int64, at time.Time) []any {
	args := p.buildArgs(cost, "")
	if p.calendars != nil {
		p.calendars.fill(args[len(args)-len(p.limitArg):], at)
	}
	return args
}

// peekWithoutRedis is the failure mode's answer to a peek, counting nothing: FailOpen admits,
// FailClosed denies, LocalCap says what the in-process cap would.
func (p *Policy) peekWithoutRedis(r Request, cause error, clock func() time.Time) Peek {
	if p.FailureMode != LocalCap {
		return Peek{Decision: p.withoutRedis(r, cause, clock, time.Second)}
	}
	ok, rem, wait := p.local.peek(r.Identity, r.Cost, clock)
	return Peek{Decision: Decision{Allowed: ok, Remaining: rem, Limit: p.local.requests, RetryAfter: wait,
		Source: SourceLocalCap, Err: cause}}
}

// decodePeek turns the peek script's reply into a Peek: {allowed, index, retry_after_ms,
// then remaining, reset_after_ms, retry_after_ms per limit}.
func decodePeek(p *Policy, v any) (Peek, error) {
	r, ok := v.([]any)
	slots := 0
	if p.Concurrency != nil {
		slots = 1
	}
	if !ok || len(r) != 3+3*len(p.Limits)+slots {
		return Peek{}, fmt.Errorf("script %s: unexpected reply %v", p.peekScript.Name, v)
	}
	n := make([]int64, len(r))
	if err := replyInts(p.peekScript, r, n); err != nil {
		return Peek{}, err
	}
	out := Peek{Limits: make([]LimitState, len(p.Limits))}
	for i, lim := range p.Limits {
		f := n[3+3*i:]
		out.Limits[i] = LimitState{Name: lim.Name, Limit: p.size(i), Remaining: f[0],
			ResetAfter: time.Duration(f[1]) * time.Millisecond, RetryAfter: waitOf(f[2])}
	}
	idx := int(n[1]) - 1
	if idx < 0 || idx >= len(p.Limits) {
		return Peek{}, fmt.Errorf("script %s: reply names limit %d of %d", p.peekScript.Name, idx+1, len(p.Limits))
	}
	out.Decision = out.report(idx, n[0] == 1)
	if slots == 1 {
		out.inFlight(p.Concurrency, n[len(n)-1])
	}
	return out, nil
}

// inFlight adds the concurrency limit c, with held slots in use, to the peek: a limit state
// of its own, and the decision's report when it is the tightest of an admission, or full.
func (pk *Peek) inFlight(c *Concurrency, held int64) {
	s := LimitState{Name: ConcurrencyLimitName, Limit: c.Max, Remaining: max(0, c.Max-held)}
	if held > 0 {
		s.ResetAfter = c.SlotTTL
	}
	if s.Remaining == 0 {
		s.RetryAfter = time.Second // a slot may come back at any moment
	}
	pk.Limits = append(pk.Limits, s)
	if pk.Allowed && (s.Remaining == 0 || s.Remaining < pk.Remaining) {
		pk.Decision = pk.report(len(pk.Limits)-1, s.Remaining > 0)
	}
}

// waitOf is a reply's wait in ms as a duration; -1 (never) stays negative.
func waitOf(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// report is the decision a peek reports, naming limit idx.
func (pk *Peek) report(idx int, allowed bool) Decision {
	s := pk.Limits[idx]
	d := Decision{Allowed: allowed, Remaining: s.Remaining, Limit: s.Limit, ResetAfter: s.ResetAfter,
		LimitName: s.Name, Source: SourceRedis}
	if !allowed {
		d.RetryAfter, d.DeniedBy = s.RetryAfter, s.Name
	}
	return d
}

// wholePeek reports the shards' peeks as one of the whole policy: each limit's remaining
// summed and its size whole, its reset the latest; a request would pass when one shard
// would take it (a check tries every shard), else it waits for the shard that frees first.
func (p *Policy) wholePeek(parts []Peek) Peek {
	out := Peek{Limits: make([]LimitState, len(p.Limits))}
	for i, lim := range p.Limits {
		s := LimitState{Name: lim.Name, Limit: p.size(i), RetryAfter: -1}
		for _, pt := range parts {
			ps := pt.Limits[i]
			s.Remaining += ps.Remaining
			s.ResetAfter = max(s.ResetAfter, ps.ResetAfter)
			if ps.RetryAfter >= 0 && (s.RetryAfter < 0 || ps.RetryAfter < s.RetryAfter) {
				s.RetryAfter = ps.RetryAfter
			}
		}
		out.Limits[i] = s
	}
	best := -1 // the shard that admits, or that waits least
	for i, pt := range parts {
		if pt.Allowed || best < 0 || !parts[best].Allowed && pt.RetryAfter >= 0 &&
			(parts[best].RetryAfter < 0 || pt.RetryAfter < parts[best].RetryAfter) {
			best = i
		}
		if pt.Allowed {
			break
		}
	}
	d := out.report(indexOf(p, parts[best].LimitName), parts[best].Allowed)
	if !d.Allowed {
		d.RetryAfter = parts[best].RetryAfter
	}
	out.Decision = d
	return out
}

// indexOf is the index of the policy's limit named name (0 when none is).
func indexOf(p *Policy, name string) int {
	for i, lim := range p.Limits {
		if lim.Name == name {
			return i
		}
	}
	return 0
}
