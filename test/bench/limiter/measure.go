package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// stats are client-side figures of one measurement.
type stats struct {
	perSec   float64
	p50, p99 time.Duration
}

// drive runs c.calls calls of fn from c.concurrency goroutines over random identities and
// returns throughput and latency percentiles.
func drive(ctx context.Context, c config, fn func(context.Context, int) error) (stats, error) {
	per := c.calls / c.concurrency
	lat := make([][]time.Duration, c.concurrency)
	errs := make(chan error, c.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7)) //nolint:gosec // load generation, not security.
			mine := make([]time.Duration, 0, per)
			for range per {
				t0 := time.Now()
				if err := fn(ctx, rng.IntN(c.identities)); err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(t0))
			}
			lat[g] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return stats{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return stats{perSec: float64(len(all)) / elapsed.Seconds(),
		p50: all[len(all)/2], p99: all[len(all)*99/100]}, nil
}

// redisBenchmark loads src, runs redis-benchmark -P 16 with EVALSHA over random identities
// (__rand_int__) and returns its calls/s and Redis's own µs per call from INFO commandstats.
func redisBenchmark(ctx context.Context, rdb *redis.Client, srv *server, c config, src string, keys, args []string) (float64, float64, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, 0, fmt.Errorf("flushall: %w", err)
	}
	sha, err := rdb.ScriptLoad(ctx, src).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("script load: %w", err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return 0, 0, fmt.Errorf("config resetstat: %w", err)
	}
	cmdArgs := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(srv.port), "-c", "50", "-P", "16",
		"-n", strconv.Itoa(c.benchCalls), "-r", strconv.Itoa(c.identities), "--csv",
		"EVALSHA", sha, strconv.Itoa(len(keys))}
	cmdArgs = append(append(cmdArgs, keys...), args...)
	out, err := exec.CommandContext(ctx, "redis-benchmark", cmdArgs...).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	rps, err := parseBenchmarkCSV(out)
	if err != nil {
		return 0, 0, err
	}
	us, err := evalshaUSPerCall(ctx, rdb)
	return rps, us, err
}

// parseBenchmarkCSV reads the rps column of redis-benchmark --csv output.
func parseBenchmarkCSV(out []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 2 || strings.Contains(f[0], "test") {
			continue
		}
		v, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
		if err == nil {
			return v, nil
		}
	}
	return 0, fmt.Errorf("no rps in redis-benchmark output: %q", out)
}

func evalshaUSPerCall(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("info commandstats: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
			if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
				return strconv.ParseFloat(v, 64) //nolint:wrapcheck // parse error names the value.
			}
		}
	}
	return 0, fmt.Errorf("no cmdstat_evalsha in INFO commandstats")
}

// bytesPerIdentity runs one check for each of n identities on an empty database and returns
// the summed MEMORY USAGE of every key divided by n.
func bytesPerIdentity(ctx context.Context, rdb *redis.Client, n int, check func(int) error) (float64, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, fmt.Errorf("flushall: %w", err)
	}
	for i := range n {
		if err := check(i); err != nil {
			return 0, err
		}
	}
	var total int64
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		b, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			return 0, fmt.Errorf("memory usage: %w", err)
		}
		total += b
	}
	if err := iter.Err(); err != nil {
		return 0, fmt.Errorf("scan: %w", err)
	}
	return float64(total) / float64(n), nil
}
