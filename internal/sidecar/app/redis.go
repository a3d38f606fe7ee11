package app

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// redisClient builds the client from the Redis options, or, when they name no address, from
// the topology of the first good snapshot. nil without error means ctx ended first.
func (a *App) redisClient(ctx context.Context) (redis.UniversalClient, error) {
	ro := a.cfg.Redis
	if len(ro.Addrs) == 0 {
		set, ok := waitForSnapshot(ctx, a.store)
		if !ok {
			return nil, nil
		}
		ro.Mode, ro.Addrs = redisconn.Mode(set.Redis.Mode), set.Redis.Addrs
		ro.MasterName, ro.DB = set.Redis.MasterName, set.Redis.DB
		ro.TLS.Enabled = ro.TLS.Enabled || set.Redis.TLS
		a.cfg.Log.Info("redis topology from the snapshot", "mode", ro.Mode, "addrs", ro.Addrs, "tls", ro.TLS.Enabled)
	}
	if err := ro.Validate(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	rdb, err := redisconn.NewClient(ro)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return rdb, nil
}

// waitForSnapshot waits for a snapshot that names Redis (a namespace without policies has
// none; the sidecar serves meanwhile, every request passing unchecked).
func waitForSnapshot(ctx context.Context, store *engine.Store) (*engine.Set, bool) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if set := store.Current(); set != nil && len(set.Redis.Addrs) > 0 {
			return set, true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-t.C:
		}
	}
}
