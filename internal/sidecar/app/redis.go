package app

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// redisConn is the Redis client the engine's limiter asks, and the topology it was built
// for.
type redisConn struct {
	rdb  redis.UniversalClient
	lim  *limiter.Limiter
	topo redisconn.Topology
}

// connect builds the client from the Redis options, or, when they name no address, from
// the topology of the first good snapshot, and installs its limiter in the engine. nil
// without error means ctx ended first.
func (a *App) connect(ctx context.Context) (*redisConn, error) {
	ro := a.cfg.Redis
	if len(ro.Addrs) == 0 {
		set, ok := waitForSnapshot(ctx, a.store)
		if !ok {
			return nil, nil
		}
		ro = a.fromSnapshot(set.Redis)
		a.cfg.Log.Info("redis topology from the snapshot", "mode", ro.Mode, "addrs", ro.Addrs, "tls", ro.TLS.Enabled)
	}
	return a.dial(ro)
}

// fromSnapshot is the sidecar's Redis options with the topology the snapshot names; the
// credentials and TLS files stay the sidecar's own.
func (a *App) fromSnapshot(r snapshot.Redis) redisconn.Options {
	ro := a.cfg.Redis
	ro.Mode, ro.Addrs = redisconn.Mode(r.Mode), r.Addrs
	ro.MasterName, ro.DB = r.MasterName, r.DB
	ro.TLS.Enabled = a.cfg.Redis.TLS.Enabled || r.TLS
	return ro
}

// dial builds a client and its limiter for ro and installs the limiter in the engine.
func (a *App) dial(ro redisconn.Options) (*redisConn, error) {
	if err := ro.Validate(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	rdb, err := redisconn.NewClient(ro)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	opts := a.cfg.Limiter
	if opts.Leases.OnLease == nil {
		opts.Leases.OnLease = a.Engine.Metrics.LeaseTaken
	}
	if opts.Leases.OnUnacknowledged == nil {
		opts.Leases.OnUnacknowledged = a.Engine.Metrics.LeaseHeld
	}
	lim, err := limiter.New(rdb, opts)
	if err != nil {
		_ = rdb.Close() // never used
		return nil, fmt.Errorf("limiter: %w", err)
	}
	a.Engine.SetLimiter(lim)
	a.health.SetPing(func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	return &redisConn{rdb: rdb, lim: lim, topo: ro.Topology()}, nil
}

// close gives back what the limiter's leases hold unspent, then closes the limiter and
// the client.
func (a *App) close(c *redisConn) {
	a.returnLeases(c.lim)
	c.lim.Close()
	_ = c.rdb.Close() // done with it; nothing to do about a close error
}

// follow rebuilds the client each time a loaded snapshot names another Redis than the one
// in use (its namespace moved to another RedisBackend): the new limiter is installed
// before the old one is closed, so checks in flight finish on the old Redis and the next
// ones ask the new one. Only when the topology comes from the snapshot (no --redis-addrs).
// It returns the connection in use when ctx ends.
func (a *App) follow(ctx context.Context, cur *redisConn, loaded <-chan struct{}) *redisConn {
	for {
		select {
		case <-ctx.Done():
			return cur
		case <-loaded:
		}
		set := a.store.Current()
		if set == nil || len(set.Redis.Addrs) == 0 {
			continue // no policy left: keep the client for the next snapshot
		}
		ro := a.fromSnapshot(set.Redis)
		if sameTopology(ro.Topology(), cur.topo) {
			continue
		}
		next, err := a.dial(ro)
		if err != nil {
			a.cfg.Log.Error(err, "the snapshot names another Redis, which cannot be reached with these settings; keeping the current one",
				"mode", ro.Mode, "addrs", ro.Addrs)
			continue
		}
		a.cfg.Log.Info("the snapshot names another Redis: checks now go there, and its counters start fresh",
			"fromMode", cur.topo.Mode, "fromAddrs", cur.topo.Addrs, "mode", next.topo.Mode, "addrs", next.topo.Addrs,
			"tls", next.topo.TLS)
		a.retire(ctx, cur)
		cur = next
	}
}

// retire closes a connection the engine no longer uses once the checks that took its
// limiter before the switch have had their time (a limiter call's timeout, and a margin),
// so none of them is failed by a closed client.
func (a *App) retire(ctx context.Context, old *redisConn) {
	grace := a.cfg.Limiter.Timeout
	if grace <= 0 {
		grace = time.Second
	}
	t := time.NewTimer(grace + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	a.close(old)
}

// sameTopology reports whether a and b reach the same Redis.
func sameTopology(a, b redisconn.Topology) bool {
	return a.Mode == b.Mode && slices.Equal(a.Addrs, b.Addrs) && a.MasterName == b.MasterName && a.DB == b.DB &&
		a.TLS == b.TLS
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

// loadSignal is the store as the snapshot sources feed it, telling loaded after each good
// load (one pending signal is enough: follow reads the store's current snapshot).
type loadSignal struct {
	*engine.Store
	loaded chan struct{}
	once   sync.Once
}

func (s *loadSignal) init() { s.once.Do(func() { s.loaded = make(chan struct{}, 1) }) }

// Load implements source.Sink.
func (s *loadSignal) Load(data []byte, origin string) error {
	if err := s.Store.Load(data, origin); err != nil {
		return err
	}
	s.init()
	select {
	case s.loaded <- struct{}{}:
	default:
	}
	return nil
}

// signal is the channel Load signals on.
func (s *loadSignal) signal() <-chan struct{} {
	s.init()
	return s.loaded
}
