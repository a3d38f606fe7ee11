package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// shardRow is one configuration of the global limit on the 3-primary Cluster.
type shardRow struct {
	name     string
	limit    int
	checks   int
	admitted int
	// falseDenials are the denials among the first L checks: the budget covered them all.
	falseDenials int
	elapsed      time.Duration
	// perPrimary is each primary's script calls (EVALSHA + EVAL, INFO commandstats).
	perPrimary []int64
}

// shardConfigs are the global-limit configurations measured: one key, three shards, and
// three shards with leases.
var shardConfigs = []struct {
	name   string
	shards int
	leases bool
}{{"1 key (today)", 1, false}, {"3 shards", 3, false}, {"3 shards + leases", 3, true}}

// measureShards runs a global FixedWindow limit of L = 10 x overLimit per 1000 hours (one
// Fixed identity) on a fresh 3-primary Cluster, 2L checks from c.callers goroutines over two
// limiters (pipelining and a deny cache, as the sidecar runs by default), for each
// configuration.
func measureShards(ctx context.Context, c config) (_ []shardRow, err error) {
	procs := redistest.NewProcs()
	defer func() { err = errors.Join(err, procs.Close()) }()
	cl, err := procs.Cluster(3)
	if err != nil {
		return nil, err
	}
	var rows []shardRow
	for _, sc := range shardConfigs {
		progress("global limit on the 3-primary Cluster: %s", sc.name)
		r, err := measureShardConfig(ctx, c, cl, sc.shards, sc.leases)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", sc.name, err)
		}
		r.name = sc.name
		rows = append(rows, r)
	}
	return rows, nil
}

func measureShardConfig(ctx context.Context, c config, cl *redistest.Cluster, shards int, leases bool) (shardRow, error) {
	limit := 10 * c.overLimit
	s := limiter.Spec{Namespace: "bench", Name: fmt.Sprintf("global-%d-%v", shards, leases), Algorithm: limiter.FixedWindow,
		Limits: []limiter.Limit{{Name: "all", Requests: int64(limit), Period: overPeriod}}, StateKey: "{rl:${namespace}/${policy}:${identity}}:${limit}",
		TTL: overPeriod, FailureMode: limiter.FailClosed, Shards: shards, Leases: leases}
	p, err := limiter.NewPolicy(s)
	if err != nil {
		return shardRow{}, fmt.Errorf("policy: %w", err)
	}
	var lims []*limiter.Limiter
	defer func() {
		for _, l := range lims {
			l.Close()
		}
	}()
	for range 2 {
		opts := cl.ClusterOptions()
		opts.PoolSize, opts.ContextTimeoutEnabled = max(c.callers, 10), true
		rdb := redis.NewClusterClient(opts)
		defer func() { _ = rdb.Close() }()
		// The sidecar's defaults: pipelining and a deny cache of 10000.
		l, err := limiter.New(rdb, limiter.Options{Pipelining: true, Workers: c.workers, Timeout: time.Second, DenyCacheSize: 10000})
		if err != nil {
			return shardRow{}, fmt.Errorf("limiter: %w", err)
		}
		lims = append(lims, l)
	}
	primaries := cl.Primaries()
	for _, srv := range primaries {
		if err := resetPrimary(ctx, srv); err != nil {
			return shardRow{}, err
		}
	}
	r := shardRow{limit: limit}
	start := time.Now()
	// First L checks (any denial is a false one: the budget covers them), then L more
	// (nothing may be admitted beyond the limit).
	for phase := range 2 {
		checks, admitted, err := hammerGlobal(ctx, lims, p, max(c.callers, 1), limit)
		if err != nil {
			return r, err
		}
		if phase == 0 {
			r.falseDenials = checks - admitted
		}
		r.checks, r.admitted = r.checks+checks, r.admitted+admitted
	}
	r.elapsed = time.Since(start)
	for _, srv := range primaries {
		n, err := primaryCalls(ctx, srv)
		if err != nil {
			return r, err
		}
		r.perPrimary = append(r.perPrimary, n)
	}
	return r, nil
}

// hammerGlobal sends about total checks of identity "all" from callers goroutines over lims
// and returns the checks sent and the admitted.
func hammerGlobal(ctx context.Context, lims []*limiter.Limiter, p *limiter.Policy, callers, total int) (int, int, error) {
	var admitted atomic.Int64
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	per := (total + callers - 1) / callers
	for g := range callers {
		wg.Go(func() {
			l := lims[g%len(lims)]
			for i := range per {
				if g*per+i >= total {
					return
				}
				d := l.Check(ctx, p, limiter.Request{Identity: "all"})
				if d.WithoutRedis() {
					errs <- fmt.Errorf("decided without Redis (%s): %w", d.Source, d.Err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return total, int(admitted.Load()), errors.Join(all...)
}

// resetPrimary clears one primary's INFO commandstats.
func resetPrimary(ctx context.Context, srv *redistest.Server) error {
	c := srv.Client()
	defer func() { _ = c.Close() }()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		return fmt.Errorf("config resetstat: %w", err)
	}
	return nil
}

// primaryCalls is one primary's script calls since its reset.
func primaryCalls(ctx context.Context, srv *redistest.Server) (int64, error) {
	c := srv.Client()
	defer func() { _ = c.Close() }()
	return scriptCallsOf(ctx, c)
}
