// Package limitercheck makes the limiter checks a sidecar makes against a real Redis, for
// the tests of what a Redis user, a TLS setting or a topology lets through: for every
// algorithm an idempotent admission, its replay and the denial of the exhausted limit,
// without and with pipelining, a concurrency slot taken, refused and released, a lease taken (its replicas asked with ROLE and WAIT) and
// returned, then the same after the scripts were flushed (the EVAL fallback, or for
// functions the manager's reload), then the breaker's PING. Every decision must come from
// Redis (or a lease it granted).
package limitercheck

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// DefaultTag is the hash tag of the controller's default key layout.
const DefaultTag = "{rl:${namespace}/${policy}:${identity}}"

// Algorithms are every algorithm the limiter runs.
var Algorithms = []limiter.Algorithm{limiter.TokenBucket, limiter.SlidingWindow, limiter.FixedWindow, limiter.GCRA}

var seq atomic.Int64

// Sidecar is what a sidecar of namespace NS runs: policies failing by Mode, their scripts
// called with EVALSHA (EVAL after NOSCRIPT) or, with Functions, as the functions the
// manager loaded (FCALL), as sidecars of per-namespace users do.
type Sidecar struct {
	// NS is the namespace of the policies.
	NS string
	// Mode is their failure mode.
	Mode limiter.FailureMode
	// Functions calls the scripts with FCALL.
	Functions bool
}

// Policy is a new policy of ns (a fresh name each call) allowing one request an hour,
// idempotent, with its state and idempotency keys under tag, calling its script with
// EVALSHA.
func Policy(ns string, alg limiter.Algorithm, mode limiter.FailureMode, tag string) (*limiter.Policy, error) {
	return Sidecar{NS: ns, Mode: mode}.Policy(alg, tag)
}

// Policy is Policy of the sidecar's namespace, mode and calls.
func (s Sidecar) Policy(alg limiter.Algorithm, tag string) (*limiter.Policy, error) {
	name := fmt.Sprintf("%s-%d", strings.ToLower(string(alg)), seq.Add(1))
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: s.NS, Name: name, Algorithm: alg,
		Limits:         []limiter.Limit{{Name: "hour", Requests: 1, Period: time.Hour}},
		StateKey:       tag + ":${limit}:${slot}",
		IdempotencyKey: tag + ":idem:${requestId}",
		TTL:            2 * time.Hour, IdempotencyTTL: time.Minute, FailureMode: s.Mode, Functions: s.Functions})
	if err != nil {
		return nil, fmt.Errorf("%s: NewPolicy: %w", alg, err)
	}
	return p, nil
}

// Algorithm checks a fresh policy of ns (default key layout) as a sidecar does: an
// idempotent admission, its replay, the denial of the exhausted limit, and a peek (the
// check API's) that finds it exhausted, each of which Redis must decide.
func Algorithm(ctx context.Context, l *limiter.Limiter, ns string, alg limiter.Algorithm, mode limiter.FailureMode) error {
	return Sidecar{NS: ns, Mode: mode}.Algorithm(ctx, l, alg)
}

// Algorithm is Algorithm with the sidecar's calls.
func (s Sidecar) Algorithm(ctx context.Context, l *limiter.Limiter, alg limiter.Algorithm) error {
	p, err := s.Policy(alg, DefaultTag)
	if err != nil {
		return err
	}
	first := l.Check(ctx, p, limiter.Request{Identity: "caller", RequestID: "req-1"})
	replay := l.Check(ctx, p, limiter.Request{Identity: "caller", RequestID: "req-1"})
	denied := l.Check(ctx, p, limiter.Request{Identity: "caller"})
	peek := l.Peek(ctx, p, limiter.Request{Identity: "caller", Cost: 1})
	if peek.Source != limiter.SourceRedis || peek.Allowed {
		return fmt.Errorf("%s: peek decided by %s (allowed %v); want Redis to find the limit spent: %w", alg, peek.Source, peek.Allowed, peek.Err)
	}
	for _, d := range []limiter.Decision{first, replay, denied} {
		if d.Source != limiter.SourceRedis {
			return fmt.Errorf("%s: decided by %s: %w", alg, d.Source, d.Err)
		}
	}
	if !first.Allowed || !replay.Allowed || !replay.Replayed || denied.Allowed {
		return fmt.Errorf("%s: decisions %+v, %+v, %+v; want admitted, replayed, denied", alg, first, replay, denied)
	}
	return nil
}

// Lease takes a lease (the local tier) for a fresh policy with leases on, as a sidecar
// does for a hot identity, and returns it: the lease script must run with its ROLE and
// WAIT (HotRate 1 makes the first check hot, and a Span of 1s asks for a lease of several
// units), and the check be answered from the lease. WAIT may take up to a second: on a
// loaded test machine a replica can need longer than the production 10ms to acknowledge,
// and this is about grants, not speed.
func (s Sidecar) Lease(ctx context.Context, c redis.UniversalClient, alg limiter.Algorithm) error {
	var held error
	l, err := limiter.New(c, limiter.Options{Timeout: 5 * time.Second, Leases: limiter.LeaseOptions{HotRate: 1, Span: time.Second, AckTimeout: time.Second,
		OnUnacknowledged: func(_ *limiter.Policy, _ int64, cause error) { held = cause }}})
	if err != nil {
		return err
	}
	defer l.Close()
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: s.NS, Name: fmt.Sprintf("lease-%s-%d", strings.ToLower(string(alg)), seq.Add(1)),
		Algorithm: alg, Limits: []limiter.Limit{{Name: "hour", Requests: 1000, Period: time.Hour}},
		StateKey: DefaultTag + ":${limit}", TTL: 2 * time.Hour, FailureMode: s.Mode, Leases: true, Functions: s.Functions})
	if err != nil {
		return fmt.Errorf("%s: NewPolicy: %w", alg, err)
	}
	if d := l.Check(ctx, p, limiter.Request{Identity: "hot-caller"}); d.Source != limiter.SourceLease || !d.Allowed {
		why := ""
		if held != nil {
			why = "; the lease was held: " + held.Error()
		}
		return fmt.Errorf("%s: leased check decided by %s (allowed %v%s): %w", alg, d.Source, d.Allowed, why, d.Err)
	}
	if err := l.ReturnLeases(ctx); err != nil {
		return fmt.Errorf("%s: %w", alg, err)
	}
	return nil
}

// Concurrency checks a fresh policy with a concurrency limit of one slot as a sidecar does:
// an admission takes the slot, a second request is refused it, the release gives it back
// and the next request takes it again, each decided by Redis.
func (s Sidecar) Concurrency(ctx context.Context, l *limiter.Limiter, alg limiter.Algorithm) error {
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: s.NS, Name: fmt.Sprintf("slots-%s-%d", strings.ToLower(string(alg)), seq.Add(1)),
		Algorithm: alg, Limits: []limiter.Limit{{Name: "hour", Requests: 1000, Period: time.Hour}},
		StateKey: DefaultTag + ":${limit}", TTL: 2 * time.Hour, FailureMode: s.Mode, Functions: s.Functions,
		Concurrency: &limiter.Concurrency{Max: 1, SlotTTL: time.Minute}})
	if err != nil {
		return fmt.Errorf("%s: NewPolicy: %w", alg, err)
	}
	slot := limiter.NewID()
	first := l.Check(ctx, p, limiter.Request{Identity: "caller", Slot: slot})
	second := l.Check(ctx, p, limiter.Request{Identity: "caller", Slot: limiter.NewID()})
	held, err := l.Release(ctx, p, "caller", slot)
	if err != nil {
		return fmt.Errorf("%s: release: %w", alg, err)
	}
	again := l.Check(ctx, p, limiter.Request{Identity: "caller", Slot: limiter.NewID()})
	for _, d := range []limiter.Decision{first, second, again} {
		if d.Source != limiter.SourceRedis {
			return fmt.Errorf("%s: slot decided by %s: %w", alg, d.Source, d.Err)
		}
	}
	if !first.Allowed || second.Allowed || !held || !again.Allowed {
		return fmt.Errorf("%s: slots %+v, %+v, released %v, %+v; want admitted, refused, released, admitted", alg, first, second, held, again)
	}
	return nil
}

// All runs Algorithm and Concurrency on c for every algorithm, without and with pipelining,
// and Lease, and returns every failure.
func All(ctx context.Context, c redis.UniversalClient, ns string, mode limiter.FailureMode) []error {
	return Sidecar{NS: ns, Mode: mode}.All(ctx, c)
}

// All is All with the sidecar's calls.
func (s Sidecar) All(ctx context.Context, c redis.UniversalClient) []error {
	var errs []error
	for _, pipelining := range []bool{false, true} {
		l, err := limiter.New(c, limiter.Options{Timeout: 5 * time.Second, Pipelining: pipelining})
		if err != nil {
			return append(errs, err)
		}
		for _, alg := range Algorithms {
			if err := s.Algorithm(ctx, l, alg); err != nil {
				errs = append(errs, fmt.Errorf("pipelining=%v: %w", pipelining, err))
			}
			if err := s.Concurrency(ctx, l, alg); err != nil {
				errs = append(errs, fmt.Errorf("pipelining=%v: %w", pipelining, err))
			}
		}
		l.Close()
	}
	for _, alg := range Algorithms {
		if err := s.Lease(ctx, c, alg); err != nil {
			errs = append(errs, fmt.Errorf("lease: %w", err))
		}
	}
	return errs
}

// Exercise does what a sidecar does with Redis through c: All (EVALSHA, and EVAL where a
// script is missing), the same after flush has emptied the script caches (see
// redistest.FlushScripts), and the breaker's PING. It returns every failure.
func Exercise(ctx context.Context, c redis.UniversalClient, ns string, mode limiter.FailureMode, flush func(context.Context) error) []error {
	return Sidecar{NS: ns, Mode: mode}.Exercise(ctx, c, flush)
}

// Exercise is Exercise with the sidecar's calls. For Functions, flush stands for what
// empties Redis of the scripts and has the manager load them again: the sidecar itself
// loads nothing.
func (s Sidecar) Exercise(ctx context.Context, c redis.UniversalClient, flush func(context.Context) error) []error {
	errs := s.All(ctx, c)
	if err := flush(ctx); err != nil {
		return append(errs, fmt.Errorf("flush: %w", err))
	}
	for _, err := range s.All(ctx, c) {
		errs = append(errs, fmt.Errorf("after the flush: %w", err))
	}
	if err := c.Ping(ctx).Err(); err != nil {
		errs = append(errs, fmt.Errorf("PING: %w", err))
	}
	return errs
}
