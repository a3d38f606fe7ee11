package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options tune a Limiter. The zero value of each field picks the default noted.
type Options struct {
	// Timeout bounds one Redis call; past it the policy's failure mode decides. Default 50ms.
	Timeout time.Duration
	// Pipelining coalesces concurrent checks into pipelines. Default off; see Workers.
	// Build the client with ContextTimeoutEnabled (redisconn does) so a stalled Redis
	// releases pipeline workers at Timeout too; callers are released at Timeout either way.
	Pipelining bool
	// Workers is how many pipelines may be in flight at once. Default 4: on loopback fewer,
	// larger pipelines win (docs/benchmarks.md); with a real network round trip more in
	// flight may pay.
	Workers int
	// MaxBatch caps the checks in one pipeline. Default 128.
	MaxBatch int
	// DenyCacheSize enables answering known denials locally, remembering up to this many
	// (policy, identity) pairs. 0 disables.
	DenyCacheSize int
	// DenyCacheHold is the longest a denial is answered locally before Redis is asked again,
	// however long its retry-after: how soon a reset or grant (Limiter.Adjust) reaches a
	// sidecar that cached the caller's denial. Default DefaultDenyCacheHold.
	DenyCacheHold time.Duration
	// BreakerThreshold is how many consecutive Redis failures open the circuit. Default 5.
	BreakerThreshold int
	// BreakerCooldown is how long an open circuit waits before probing Redis in the
	// background (PING). Default 250ms, doubling on failed probes up to 5s.
	BreakerCooldown time.Duration
	// Now is the clock for local decisions (deny cache, local cap, breaker, leases).
	// Default time.Now.
	Now func() time.Time
	// Leases tune the local tier, used for policies with Spec.Leases.
	Leases LeaseOptions
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 50 * time.Millisecond
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 128
	}
	if o.BreakerThreshold <= 0 {
		o.BreakerThreshold = 5
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = 250 * time.Millisecond
	}
	if o.DenyCacheHold <= 0 {
		o.DenyCacheHold = DefaultDenyCacheHold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Request is one check.
type Request struct {
	// Identity is the caller's identity, untrusted; it is encoded before entering a key.
	Identity string
	// Cost is the weight debited from every limit; values below 1 count as 1.
	Cost int64
	// RequestID, when set and the policy has idempotency, makes the check idempotent.
	RequestID string
	// Fingerprint describes the request for idempotency, e.g. its method, host and path:
	// a request id replays its first decision only for a request with the same identity,
	// cost and Fingerprint; another request under a seen id counts as new.
	Fingerprint string
	// Slot, for a policy with a concurrency limit, is the slot id the request takes when
	// admitted (NewID), held until Release.
	Slot string
}

// Limiter answers checks against Redis (standalone, Cluster or Sentinel through
// redis.UniversalClient). Safe for concurrent use.
type Limiter struct {
	rdb       redis.UniversalClient
	opts      Options
	breaker   *breaker
	primaries *primaries // per-primary breakers on Redis Cluster
	batch     *batcher
	denies    *denyCache
	leases    *localTier
	// replicas is the replica count each primary's ROLE last gave (address -> int64; ""
	// for the one primary of a standalone or Sentinel setup), what a lease call's WAIT
	// waits for.
	replicas sync.Map
	stats    errorStats
	// socketDeadlines is true when the client cuts socket reads at the context deadline
	// (ContextTimeoutEnabled), so a direct call needs no watcher goroutine.
	socketDeadlines bool
	// clockOffset is how far (ns) the Redis server clock runs ahead of opts.Now, as the last
	// stale-window reply said (see Now): the windows of calendar limits are computed
	// on the server's time.
	clockOffset atomic.Int64
}

// DefaultDenyCacheHold is Options.DenyCacheHold's default: a caller denied for an hour costs
// Redis one check per 5 s per sidecar, and a reset reaches every sidecar within 5 s.
const DefaultDenyCacheHold = 5 * time.Second

// ErrCircuitOpen is the error of decisions made while the circuit breaker is open.
var ErrCircuitOpen = errors.New("redis circuit breaker open")

// ErrOverloaded is the error of decisions made because the pipeline queue was full.
var ErrOverloaded = errors.New("redis pipeline queue full")

// New returns a Limiter on rdb. Close it to stop its pipeline workers.
func New(rdb redis.UniversalClient, opts Options) (*Limiter, error) {
	opts.defaults()
	l := &Limiter{rdb: rdb, opts: opts, socketDeadlines: contextDeadlines(rdb)}
	l.breaker = newBreaker(opts.BreakerThreshold, opts.BreakerCooldown, 5*time.Second,
		max(opts.Timeout, time.Second), func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	l.primaries = newPrimaries(rdb, opts)
	var err error
	if opts.DenyCacheSize > 0 {
		if l.denies, err = newDenyCache(opts.DenyCacheSize, opts.DenyCacheHold, opts.Timeout); err != nil {
			return nil, fmt.Errorf("deny cache: %w", err)
		}
	}
	if l.leases, err = newLocalTier(l, opts.Leases, opts.Timeout, opts.Now()); err != nil {
		return nil, err
	}
	if opts.Pipelining {
		l.batch = newBatcher(rdb, opts.Workers, opts.MaxBatch, opts.Timeout)
	}
	return l, nil
}

// Close stops the pipeline workers and the breaker's probe. The Redis client is the
// caller's to close.
func (l *Limiter) Close() {
	l.breaker.close()
	if l.primaries != nil {
		l.primaries.close()
	}
	if l.batch != nil {
		l.batch.close()
	}
}

// PipelineStats are the pipelines sent since New and the checks they carried (their ratio is
// the mean batch size); zero without pipelining.
func (l *Limiter) PipelineStats() (pipelines, checks uint64) {
	if l.batch == nil {
		return 0, 0
	}
	return l.batch.batches.Load(), l.batch.calls.Load()
}

// Check decides one request. It never returns an error: when Redis cannot answer in time,
// the policy's failure mode decides and the Decision says so (Source, Err).
func (l *Limiter) Check(ctx context.Context, p *Policy, r Request) Decision {
	r.Cost = max(r.Cost, 1)
	if p.Concurrency != nil {
		return l.acquire(ctx, p, r)
	}
	if p.shards != nil {
		return l.checkSharded(ctx, p, r)
	}
	return l.checkOne(ctx, p, r)
}

// checkOne is Check of a policy that is not sharded (or one shard of one).
func (l *Limiter) checkOne(ctx context.Context, p *Policy, r Request) Decision {
	idempotent := p.idempotent(r)
	now := l.opts.Now()
	if l.denies != nil && !idempotent {
		if d, ok := l.denies.get(p, r.Identity, r.Cost, now); ok {
			return d
		}
	}
	// An idempotent check always asks Redis: its id must be recorded with its decision.
	if p.Leases && !idempotent {
		if d, ok := l.leases.check(ctx, p, r, now); ok {
			return d
		}
	}
	keys := p.Keys(r.Identity, r.RequestID)
	b := l.breakerFor(ctx, keys[0])
	if !b.allow() {
		l.stats.circuitOpen.Add(1)
		l.reloadSlots(ctx) // the shard may have failed over since its breaker opened
		return l.fallback(p, r, ErrCircuitOpen, b)
	}
	v, err := l.evalAt(ctx, p, keys, r)
	if err != nil {
		l.failed(ctx, b, err)
		return l.fallback(p, r, fmt.Errorf("policy %s/%s: %w", p.Namespace, p.Name, err), b)
	}
	b.success()
	d, err := decodeReply(p, v)
	if err != nil {
		l.stats.count(KindCall)
		return l.fallback(p, r, fmt.Errorf("%w: %w", errBadReply, err), b)
	}
	if l.denies != nil && !idempotent {
		l.denies.put(p, r.Identity, r.Cost, d, now)
	}
	return d
}

// failed records what a failed call says about its node (see ErrorKind): only a node that did
// not answer in time, or cannot serve anyone, counts against its breaker; a node that answered
// about the call itself, or about the slot map, is healthy. A caller that went away (its
// context done) says nothing about Redis.
func (l *Limiter) failed(ctx context.Context, b *breaker, err error) {
	if ctx.Err() != nil {
		l.stats.count(KindLocal)
		return
	}
	kind := KindOf(err)
	l.stats.count(kind)
	switch kind {
	case KindNode:
		b.failure(l.opts.Now())
		l.reloadSlots(ctx)
	case KindTopology:
		b.success()
		l.reloadSlots(ctx)
	case KindCall:
		b.success()
	case KindLocal:
	}
}

// evalAt sends the script call with the calendar windows (if any) of the server's time as
// the limiter knows it (see atServerTime).
func (l *Limiter) evalAt(ctx context.Context, p *Policy, keys []string, r Request) (any, error) {
	if p.calendars == nil { // no windows: no clock to read, no closure to allocate
		return l.eval(ctx, p, keys, p.ArgsAt(r, time.Time{}))
	}
	return l.atServerTime(p, func(at time.Time) (any, error) { return l.eval(ctx, p, keys, p.ArgsAt(r, at)) })
}

// eval sends the script call, through the batcher when pipelining is on. Timeout is enforced
// on the socket when the client honours context deadlines (ContextTimeoutEnabled, as
// redisconn builds it); otherwise a timer of our own bounds the wait.
func (l *Limiter) eval(ctx context.Context, p *Policy, keys []string, args []any) (any, error) {
	if l.batch == nil && l.socketDeadlines {
		ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
		return evalOne(ctx, l.rdb, p.script, keys, args)
	}
	if !l.socketDeadlines {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
	}
	// With socket deadlines the worker's pipeline always answers within Timeout, so a
	// pipelined check waits without a timer (one allocation fewer on the hot path).
	c := newCall(p.script, keys, args)
	c.policy = p
	if l.batch == nil {
		go func() { c.finish(evalOne(ctx, l.rdb, c.script, c.keys, c.args)) }()
	} else if !l.batch.submit(c) {
		c.release()
		return nil, ErrOverloaded
	}
	select {
	case res := <-c.done:
		c.release()
		return res.val, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for redis: %w", ctx.Err())
	}
}

// fallback decides without Redis, by the policy's failure mode.
func (l *Limiter) fallback(p *Policy, r Request, cause error, b *breaker) Decision {
	return p.withoutRedis(r, cause, l.opts.Now, max(b.retryIn(l.opts.Now()), time.Second))
}

// reloadSlots asks a Cluster client to refresh its slot map, so a promoted replica is found
// as soon as possible: a dead primary answers nothing that would trigger a reload. go-redis
// coalesces the requests (one reload at a time, with a short cooldown), so this is cheap.
func (l *Limiter) reloadSlots(ctx context.Context) {
	if l.primaries != nil {
		l.primaries.cc.ReloadState(ctx)
	}
}

// contextDeadlines reports whether the client applies context deadlines to its sockets.
func contextDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	default:
		return false
	}
}
