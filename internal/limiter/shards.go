package limiter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// shards gives each Redis Cluster primary its own circuit breaker, so one failed shard sends
// only its own identities to the failure mode: with one breaker for the whole cluster, a
// killed primary sent 22-45% of the checks of the healthy primaries to the failure mode too
// (measured by the cluster fault tests). Standalone and Sentinel keep the single breaker.
type shards struct {
	cc     *redis.ClusterClient
	create func(probe func(context.Context) error) *breaker
	byAddr sync.Map // primary address -> *breaker
}

// breakerFor is the breaker of the primary that owns key, or the limiter's own breaker
// when not on Cluster or the slot's owner is unknown.
func (l *Limiter) breakerFor(ctx context.Context, key string) *breaker {
	if l.shards == nil {
		return l.breaker
	}
	node, err := l.shards.cc.MasterForKey(ctx, key)
	if err != nil {
		return l.breaker
	}
	return l.shards.get(node)
}

func (s *shards) get(node *redis.Client) *breaker {
	addr := node.Options().Addr
	if b, ok := s.byAddr.Load(addr); ok {
		return b.(*breaker) //nolint:forcetypeassert // only *breaker is stored
	}
	b := s.create(func(ctx context.Context) error {
		if err := node.Ping(ctx).Err(); err != nil {
			s.cc.ReloadState(ctx) // the shard may have failed over: look for its new primary
			return fmt.Errorf("probe %s: %w", addr, err)
		}
		return nil
	})
	actual, loaded := s.byAddr.LoadOrStore(addr, b)
	if loaded {
		b.close()
	}
	return actual.(*breaker) //nolint:forcetypeassert // only *breaker is stored
}

// close stops every shard breaker's probe.
func (s *shards) close() {
	s.byAddr.Range(func(_, b any) bool {
		b.(*breaker).close() //nolint:forcetypeassert // only *breaker is stored
		return true
	})
}

// newShards returns per-primary breakers for a Cluster client, or nil.
func newShards(rdb redis.UniversalClient, opts Options) *shards {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	return &shards{cc: cc, create: func(probe func(context.Context) error) *breaker {
		return newBreaker(opts.BreakerThreshold, opts.BreakerCooldown, 5*time.Second, max(opts.Timeout, time.Second), probe)
	}}
}
