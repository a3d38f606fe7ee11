package limiter

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// LeaseOptions tune the local tier: leases of units for hot identities of policies with
// Spec.Leases. The zero value of each field picks the default noted.
type LeaseOptions struct {
	// HotRate is the checks per second of one identity at this process from which it is
	// served from leases; colder identities always ask Redis. Default 50.
	HotRate float64
	// Span is how long one lease should last at the identity's observed rate: a window
	// lease asks for rate * Span units; a TokenBucket or GCRA lease for the cells spent or
	// passed in Span, max(rate, 1/T) * Span (a cell must be spent before it starts).
	// Default 100ms.
	Span time.Duration
	// MaxUnits caps one lease. Default 1000.
	MaxUnits int64
	// Share bounds one lease to 1/Share of what the tightest limit has left, atomically in
	// the script, so that one sidecar never takes it all: near the end, leases shrink and
	// below minLeaseUnits checks go to Redis one by one. Default 4.
	Share int64
	// Identities bounds the (policy, identity) pairs tracked; the least recently used are
	// forgotten with their unspent units (under-admission, never over). Default 10000.
	Identities int
	// OnLease, when set, is told of every lease call: the units granted (0: refused) and
	// those returned from the caller's previous lease.
	OnLease func(p *Policy, granted, returned int64)
	// AckTimeout is how long a lease call waits for every replica of its primary to
	// acknowledge it (WAIT); units not acknowledged are never spent (see leaseack.go).
	// Default 20ms (WAIT answers as soon as the replicas have acknowledged, so a longer
	// bound costs nothing while they are healthy); at most half the limiter's Timeout, at
	// least 1ms (WAIT takes whole milliseconds, and 0 would wait forever).
	AckTimeout time.Duration
	// OnUnacknowledged, when set, is told of every lease granted but held unspent because
	// not every replica acknowledged it, or the replicas could not be asked (cause says
	// which: a refused ROLE or WAIT means the Redis user lacks +role or +wait).
	OnUnacknowledged func(p *Policy, units int64, cause error)
}

func (o *LeaseOptions) defaults() {
	if o.HotRate <= 0 {
		o.HotRate = 50
	}
	if o.Span <= 0 {
		o.Span = 100 * time.Millisecond
	}
	if o.MaxUnits <= 0 {
		o.MaxUnits = 1000
	}
	if o.Share <= 0 {
		o.Share = 4
	}
	if o.Identities <= 0 {
		o.Identities = 10000
	}
	if o.AckTimeout < time.Millisecond {
		o.AckTimeout = defaultAckTimeout
	}
}

// localTier holds the leases of this process. It sits on the core limiter and reaches it
// only through core: the core calls check, never the other way round.
type localTier struct {
	core    tierCore
	opts    LeaseOptions
	filter  *hotFilter
	entries *lru.Cache[denyKey, *leaseEntry]
	prefix  string
	seq     atomic.Uint64
}

func newLocalTier(core tierCore, o LeaseOptions, timeout time.Duration, now time.Time) (*localTier, error) {
	o.defaults()
	// WAIT must answer before the call's own timeout, or every lease would be lost.
	o.AckTimeout = max(min(o.AckTimeout, timeout/2), time.Millisecond)
	c, err := lru.New[denyKey, *leaseEntry](o.Identities)
	if err != nil {
		return nil, fmt.Errorf("lease table: %w", err)
	}
	// Lease ids are unique per process start and sequence: a record never names another's.
	return &localTier{core: core, opts: o, filter: newHotFilter(), entries: c, prefix: strconv.FormatInt(now.UnixNano(), 36)}, nil
}

// entry is the identity's state, created on first sight.
func (t *localTier) entry(p *Policy, identity string) *leaseEntry {
	k := newDenyKey(p, identity)
	if e, ok := t.entries.Get(k); ok {
		return e
	}
	e := &leaseEntry{}
	if prev, found, _ := t.entries.PeekOrAdd(k, e); found {
		return prev
	}
	return e
}

// each calls f with every tracked identity's entry, under the entry's lock.
func (t *localTier) each(f func(k denyKey, e *leaseEntry)) {
	for _, k := range t.entries.Keys() {
		if e, ok := t.entries.Peek(k); ok {
			e.mu.Lock()
			f(k, e)
			e.mu.Unlock()
		}
	}
}

func (t *localTier) newID() string {
	return t.prefix + "." + strconv.FormatUint(t.seq.Add(1), 36)
}

// want is the lease size for an identity seen at rate checks/s: rate * Span for windows;
// for TokenBucket and GCRA, whose cells must be spent before they start (one starts every
// T), max(rate, 1/T) * Span. At least cost, at most MaxUnits (the script also keeps it
// within 1/Share of what is left).
func (t *localTier) want(p *Policy, rate float64, cost int64) int64 {
	if p.Algorithm.desc().bucket {
		rate = max(rate, 1e6/float64(p.minInterval()))
	}
	return max(min(int64(math.Ceil(rate*t.opts.Span.Seconds())), t.opts.MaxUnits), cost)
}

// minInterval is the smallest T of the policy's limits, in µs.
func (p *Policy) minInterval() int64 {
	m := int64(math.MaxInt64)
	for _, l := range p.Limits {
		m = min(m, interval(l))
	}
	return max(m, 1)
}

// check answers r locally when its identity is hot here: from its lease, or from a new
// one; ok false sends r to Redis as usual. A cold identity costs one hot-filter update.
func (t *localTier) check(ctx context.Context, p *Policy, r Request, now time.Time) (Decision, bool) {
	rate := t.filter.observe(p, r.Identity, now)
	if rate < t.opts.HotRate {
		return Decision{}, false
	}
	return t.fromLease(ctx, p, r, t.entry(p, r.Identity), rate)
}

// fromLease answers r from the identity's lease, taking a new one when the identity is hot
// and the lease is spent; ok false sends r to Redis as usual. The clock is read once the
// entry's lock is held: a check that waited for the lock across a window's end must not
// spend the old window's units.
func (t *localTier) fromLease(ctx context.Context, p *Policy, r Request, e *leaseEntry, rate float64) (Decision, bool) {
	e.mu.Lock()
	now := t.core.now()
	e.rate, e.seen = rate, now
	if e.cur != nil && e.cur.take(r.Cost, now) {
		d := leased(p, e.cur, now)
		e.mu.Unlock()
		return d, true
	}
	if e.fetching {
		ready := e.ready
		e.mu.Unlock()
		return e.await(ctx, ready, p, r.Cost, t.core.callTimeout(), t.core.now)
	}
	if now.Before(e.quiet) {
		e.mu.Unlock()
		return Decision{}, false
	}
	want := t.want(p, rate, r.Cost)
	if want < minLeaseUnits {
		e.mu.Unlock()
		return Decision{}, false
	}
	// The lease in force ends here: its units are returned by this call and never spent.
	prev := e.cur
	e.cur, e.fetching, e.ready = nil, true, make(chan struct{})
	e.mu.Unlock()
	return t.takeLease(ctx, p, r, e, want, prev)
}

// takeLease runs the lease script: prev's unspent units back, up to want new ones.
func (t *localTier) takeLease(ctx context.Context, p *Policy, r Request, e *leaseEntry, want int64, prev *lease) (Decision, bool) {
	id := t.newID()
	state := p.Keys(r.Identity, "")
	keys := leaseKeys(state, id, prev)
	b := t.core.breakerFor(ctx, keys[0])
	if !b.allow() {
		e.settle(nil, time.Time{})
		return Decision{}, false // the usual path answers by the failure mode
	}
	sent := t.core.now()
	cctx, cancel := context.WithTimeout(ctx, t.core.callTimeout())
	round := t.core.leaseRoundTrip(cctx, p.leaseScript, keys, p.leaseArgs(want, t.opts.Share, prev, t.core.Now()), t.opts.AckTimeout)
	cancel()
	if err := round.err; err != nil {
		e.settle(nil, time.Time{})
		t.core.failed(ctx, b, err)
		if redirected(err) || tryAgain(err) {
			return Decision{}, false // the script did not run: the usual path follows the slot
		}
		// The lease may have been taken (a lost reply): its units are lost, never spent.
		return t.core.fallback(p, r, fmt.Errorf("policy %s/%s: lease: %w", p.Namespace, p.Name, err), b), true
	}
	b.success()
	if at, stale := staleWindow(round.val); stale {
		// The server clock is outside a calendar window the call gave: the previous lease went
		// back, nothing was taken. The usual path decides (on the server's windows), and the
		// next lease call takes them.
		t.core.learnClock(at)
		e.settle(nil, time.Time{})
		return Decision{}, false
	}
	rep, err := decodeLease(p, round.val, id, sent)
	if err != nil {
		e.settle(nil, time.Time{})
		t.core.badReply()
		return t.core.fallback(p, r, fmt.Errorf("%w: %w", errBadReply, err), b), true
	}
	if f := t.opts.OnLease; f != nil {
		f(p, unitsOf(rep.lease), rep.returned)
	}
	quiet := t.core.now().Add(t.opts.Span)
	switch {
	case rep.lease == nil:
		// Too little left to lease: ask Redis one by one for a while.
		e.settle(nil, quiet)
		return Decision{}, false
	case !round.acked:
		// Held, never spent: the next lease call returns it. Meanwhile Redis decides.
		rep.lease.state, rep.lease.held = state, true
		e.settle(rep.lease, quiet)
		if f := t.opts.OnUnacknowledged; f != nil {
			f(p, rep.lease.units, round.cause)
		}
		return Decision{}, false
	}
	rep.lease.state = state
	return e.settle(rep.lease, time.Time{}).spend(p, r.Cost, t.core.now)
}

func unitsOf(ls *lease) int64 {
	if ls == nil {
		return 0
	}
	return ls.units
}

// settle installs the outcome of a lease call: ls (nil: none) and a quiet period.
func (e *leaseEntry) settle(ls *lease, quiet time.Time) *leaseEntry {
	e.mu.Lock()
	e.cur, e.fetching, e.quiet = ls, false, quiet
	close(e.ready)
	e.mu.Unlock()
	return e
}

// await waits, at most timeout, for the lease call in flight and then spends from its
// lease; ok false sends the check to Redis as usual.
func (e *leaseEntry) await(ctx context.Context, ready chan struct{}, p *Policy, cost int64, timeout time.Duration, now func() time.Time) (Decision, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ready:
		return e.spend(p, cost, now)
	case <-t.C:
	case <-ctx.Done():
	}
	return Decision{}, false
}

// spend answers a check from the lease in force, if it can, judged by the clock read under
// the entry's lock.
func (e *leaseEntry) spend(p *Policy, cost int64, clock func() time.Time) (Decision, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := clock()
	if e.cur == nil || !e.cur.take(cost, now) {
		return Decision{}, false
	}
	return leased(p, e.cur, now), true
}

// leased is the decision of a check answered from ls at now: admitted, with Remaining the
// units this process still holds (what the identity has left is at least that) and, for
// the windows, ResetAfter the end of the lease's window (TokenBucket and GCRA: 0, unknown
// here).
func leased(p *Policy, ls *lease, now time.Time) Decision {
	d := Decision{Allowed: true, Remaining: ls.left(now), Limit: p.size(0), LimitName: p.Limits[0].Name, Source: SourceLease}
	if ls.step == 0 {
		d.ResetAfter = max(0, ls.base.Sub(now))
	}
	return d
}
