package main

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// leaseStats counts one limiter's lease calls and the leases held unspent because not every
// replica acknowledged them, and times each lease round trip (ROLE, the lease script and
// WAIT in one pipeline, internal/limiter/leaseack.go) as the client sees it: a go-redis hook
// on the limiter's client, which costs one comparison per pipeline.
type leaseStats struct {
	calls, held atomic.Int64

	mu    sync.Mutex
	trips []time.Duration
}

// maxTrips bounds the round trips kept for the median.
const maxTrips = 1 << 16

// options are the lease options of a limiter whose lease calls s counts.
func (s *leaseStats) options() limiter.LeaseOptions {
	return limiter.LeaseOptions{
		OnLease:          func(*limiter.Policy, int64, int64) { s.calls.Add(1) },
		OnUnacknowledged: func(*limiter.Policy, int64, error) { s.held.Add(1) },
	}
}

// mark forgets the round trips timed so far and returns the counts so far: the start of a
// measured run.
func (s *leaseStats) mark() (calls, held int64) {
	s.mu.Lock()
	s.trips = s.trips[:0]
	s.mu.Unlock()
	return s.calls.Load(), s.held.Load()
}

// tripP50 is the median lease round trip so far, 0 without any.
func (s *leaseStats) tripP50() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.trips) == 0 {
		return 0
	}
	t := slices.Clone(s.trips)
	slices.Sort(t)
	return t[len(t)/2]
}

// DialHook is go-redis's dial, untouched.
func (s *leaseStats) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

// ProcessHook is go-redis's single command, untouched.
func (s *leaseStats) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return next(ctx, cmd) }
}

// ProcessPipelineHook times the pipelines that are lease round trips: three commands, ROLE
// first.
func (s *leaseStats) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) != 3 || cmds[0].Name() != "role" {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		d := time.Since(start)
		s.mu.Lock()
		if len(s.trips) < maxTrips {
			s.trips = append(s.trips, d)
		}
		s.mu.Unlock()
		return err
	}
}
