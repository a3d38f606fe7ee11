package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchredis"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// clusterRow is the pipelined limiter on a Redis Cluster of some primaries.
type clusterRow struct {
	primaries int
	runs      []load.Stats
	// stat sums INFO commandstats EVALSHA over the primaries, over all runs.
	stat benchredis.CommandStat
	// cpu is the redis-server CPU (INFO cpu) of all primaries over all runs.
	cpu time.Duration
	// busiest is the largest share of the EVALSHA calls one primary executed.
	busiest float64
}

// measureCluster runs, for each primaries count, a fresh Cluster and the same load as the
// table's pipelined limiter column: TokenBucket, c.callers callers over c.identities
// identities, whose hash tags spread them over all slots.
func measureCluster(ctx context.Context, c config, primaries []int) ([]clusterRow, error) {
	p, err := newPolicy(limiter.TokenBucket, "bench", "token-bucket",
		limiter.Limit{Name: "rate", Requests: requestsPerSecond, Period: time.Second}, 0, limiter.FailOpen)
	if err != nil {
		return nil, err
	}
	var rows []clusterRow
	for _, n := range primaries {
		progress("Redis Cluster with %d primaries", n)
		r, err := measureClusterOf(ctx, c, n, p)
		if err != nil {
			return rows, fmt.Errorf("cluster of %d primaries: %w", n, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func measureClusterOf(ctx context.Context, c config, n int, p *limiter.Policy) (_ clusterRow, err error) {
	procs := redistest.NewProcs()
	defer func() { err = errors.Join(err, procs.Close()) }()
	cl, err := procs.Cluster(n)
	if err != nil {
		return clusterRow{}, err
	}
	opts := cl.ClusterOptions()
	opts.PoolSize, opts.ContextTimeoutEnabled = max(c.callers, 10), true // as redisconn builds it
	rdb := redis.NewClusterClient(opts)
	defer func() { _ = rdb.Close() }()
	// As the controller does: the script preloaded on every primary.
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ScriptLoad(ctx, p.Script().Source).Err()
	}); err != nil {
		return clusterRow{}, fmt.Errorf("script load: %w", err)
	}
	r := clusterRow{primaries: n}
	perPrimary := map[string]benchredis.CommandStat{}
	for range max(c.reps, 1) {
		if err := resetStats(ctx, rdb); err != nil {
			return r, err
		}
		cpu0, err := clusterCPU(ctx, rdb)
		if err != nil {
			return r, err
		}
		s, err := measureDirect(ctx, c, c.callers, rdb, p)
		if err != nil {
			return r, err
		}
		r.runs = append(r.runs, s)
		cpu1, err := clusterCPU(ctx, rdb)
		if err != nil {
			return r, err
		}
		r.cpu += cpu1 - cpu0
		if err := addStats(ctx, rdb, perPrimary); err != nil {
			return r, err
		}
	}
	for _, st := range perPrimary {
		r.stat = r.stat.Add(st)
	}
	for _, st := range perPrimary {
		r.busiest = max(r.busiest, float64(st.Calls)/float64(max(r.stat.Calls, 1)))
	}
	return r, nil
}

// resetStats clears INFO commandstats on every primary (CONFIG RESETSTAT).
func resetStats(ctx context.Context, rdb *redis.ClusterClient) error {
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ConfigResetStat(ctx).Err()
	}); err != nil {
		return fmt.Errorf("config resetstat: %w", err)
	}
	return nil
}

// addStats adds every primary's EVALSHA commandstats to per (keyed by address).
func addStats(ctx context.Context, rdb *redis.ClusterClient, per map[string]benchredis.CommandStat) error {
	var mu sync.Mutex
	return rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		st, err := benchredis.Commandstat(ctx, m, "evalsha")
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		per[m.Options().Addr] = per[m.Options().Addr].Add(st)
		return nil
	})
}

// clusterCPU is the CPU all primaries have used (INFO cpu).
func clusterCPU(ctx context.Context, rdb *redis.ClusterClient) (time.Duration, error) {
	var mu sync.Mutex
	var total time.Duration
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		cpu, err := benchredis.CPU(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		total += cpu
		return err
	})
	return total, err
}
