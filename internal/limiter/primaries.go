package limiter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// primaries gives each Redis Cluster primary its own circuit breaker, so one failed primary sends
// only its own identities to the failure mode: with one breaker for the whole cluster, a
// killed primary sent checks of the healthy primaries to the failure mode too
// (docs/benchmarks.md, "Measurements behind the defaults"). Standalone and Sentinel keep
// the single breaker.
//
// A breaker belongs to a primary's address, not to the go-redis client of the moment: go-redis
// closes a node's client a minute after the node left its slot map and makes a new one when
// the node returns, so a probe holding the first client would fail with "redis: client is
// closed" for good. Each probe therefore asks a fresh slot map which client serves that
// address as a primary now; a breaker whose address serves no slot any more is retired (see
// probe).
type primaries struct {
	cc     *redis.ClusterClient
	create func(probe func(context.Context) error) *breaker
	byAddr sync.Map // primary address -> *breaker

	mu     sync.Mutex
	closed bool // set by close: breakers made later are closed at once
}

// breakerFor is the breaker of the primary that owns key, or the limiter's own breaker
// when not on Cluster or the slot's owner is unknown.
func (l *Limiter) breakerFor(ctx context.Context, key string) *breaker {
	if l.primaries == nil {
		return l.breaker
	}
	node, err := l.primaries.cc.MasterForKey(ctx, key)
	if err != nil {
		return l.breaker
	}
	return l.primaries.get(node.Options().Addr)
}

// get returns the breaker of the primary at addr, making it on first use.
func (s *primaries) get(addr string) *breaker {
	if b, ok := s.byAddr.Load(addr); ok {
		return b.(*breaker) //nolint:forcetypeassert // only *breaker is stored
	}
	var b *breaker
	b = s.create(func(ctx context.Context) error { return s.probe(ctx, addr, b) })
	actual, loaded := s.byAddr.LoadOrStore(addr, b)
	if loaded {
		b.close()
		return actual.(*breaker) //nolint:forcetypeassert // only *breaker is stored
	}
	s.mu.Lock()
	if s.closed {
		b.close()
	}
	s.mu.Unlock()
	return b
}

// probe is the open breaker b's test of the primary at addr: PING through the client that a
// freshly loaded slot map names for addr (the reload also lets checks find a promoted
// replica). When addr is no primary any more, no check can be routed there: b is retired,
// forgotten so that the node gets a fresh breaker if it becomes a primary again, and probe
// reports success, which closes b and ends its probe loop.
func (s *primaries) probe(ctx context.Context, addr string, b *breaker) error {
	node, err := s.primary(ctx, addr)
	if err != nil {
		return fmt.Errorf("probe %s: slot map: %w", addr, err)
	}
	if node == nil {
		s.byAddr.CompareAndDelete(addr, b)
		return nil
	}
	if err := node.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("probe %s: %w", addr, err)
	}
	return nil
}

// primary reloads the slot map and returns the client of the primary at addr, or nil when
// addr serves no slot.
func (s *primaries) primary(ctx context.Context, addr string) (*redis.Client, error) {
	var (
		mu    sync.Mutex
		found *redis.Client
	)
	// ForEachMaster reloads the slot map first (ClusterClient.ForEachMaster: state.ReloadOrGet).
	err := s.cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reload: %w", err)
	}
	return found, nil
}

// close stops every shard breaker's probe, and those of breakers made from now on.
func (s *primaries) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.byAddr.Range(func(_, b any) bool {
		b.(*breaker).close() //nolint:forcetypeassert // only *breaker is stored
		return true
	})
}

// newPrimaries returns per-primary breakers for a Cluster client, or nil.
func newPrimaries(rdb redis.UniversalClient, opts Options) *primaries {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	return &primaries{cc: cc, create: func(probe func(context.Context) error) *breaker {
		return newBreaker(opts.BreakerThreshold, opts.BreakerCooldown, 5*time.Second, max(opts.Timeout, time.Second), probe)
	}}
}
