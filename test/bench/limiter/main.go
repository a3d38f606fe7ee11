// Command limiter-bench measures the limiter scripts on one local redis-server and prints
// one table: Redis µs per call (INFO commandstats), the redis-benchmark -P 16 EVALSHA ceiling,
// Go client decisions/s and latency unpipelined and pipelined, and Redis bytes per active
// identity (MEMORY USAGE). A straightforward token bucket (HMGET + HMSET + PEXPIRE) is
// measured beside them as the baseline. Run with `make bench`.
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

//go:embed baseline_token_bucket.lua
var baselineSrc string

type config struct {
	calls       int
	concurrency int
	identities  int
	benchCalls  int
	workers     int
}

func main() {
	var c config
	flag.IntVar(&c.calls, "calls", 200000, "Go client checks per measurement")
	flag.IntVar(&c.concurrency, "concurrency", 64, "concurrent callers")
	flag.IntVar(&c.identities, "identities", 10000, "distinct identities")
	flag.IntVar(&c.benchCalls, "redis-benchmark-calls", 300000, "calls per redis-benchmark run")
	flag.IntVar(&c.workers, "workers", 0, "pipeline workers (0: the limiter's default)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "limiter-bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	srv, err := startServer()
	if err != nil {
		return err
	}
	defer srv.stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), PoolSize: c.concurrency, ContextTimeoutEnabled: true}) // as redisconn builds it
	defer func() { _ = rdb.Close() }()
	ctx := context.Background()

	var rows []row
	base, err := measureBaseline(ctx, rdb, srv, c)
	if err != nil {
		return err
	}
	rows = append(rows, base)
	for _, alg := range []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA, limiter.FixedWindow, limiter.SlidingWindow} {
		r, err := measureAlgorithm(ctx, rdb, srv, c, alg)
		if err != nil {
			return fmt.Errorf("%s: %w", alg, err)
		}
		rows = append(rows, r)
	}
	printTable(os.Stdout, rows, base, c)
	return nil
}

// row is one script's figures.
type row struct {
	name       string
	redisUS    float64 // INFO commandstats usec_per_call for EVALSHA
	ceiling    float64 // redis-benchmark -P 16 EVALSHA calls/s
	direct     stats   // Go client, one round trip per check
	piped      stats   // Go client, coalesced pipelines
	bytesPerID float64 // default layout, long names: {rl:default/api-per-key:user-00001234}:per-second
	bytesShort float64 // default layout, short names: {rl:shop/api:user-00001234}:rps
}

func policyFor(alg limiter.Algorithm) (*limiter.Policy, error) {
	return namedPolicy(alg, "default", "api-per-key", "per-second")
}

func shortPolicyFor(alg limiter.Algorithm) (*limiter.Policy, error) {
	return namedPolicy(alg, "shop", "api", "rps")
}

// namedPolicy is a single-limit policy (100/s) with the default key layout.
func namedPolicy(alg limiter.Algorithm, namespace, name, limit string) (*limiter.Policy, error) {
	key := "{rl:${namespace}/${policy}:${identity}}:${limit}"
	if alg == limiter.SlidingWindow {
		key += ":${slot}"
	}
	p, err := limiter.NewPolicy(limiter.PolicyConfig{Namespace: namespace, Name: name,
		Algorithm: alg, Limits: []limiter.Limit{{Name: limit, Requests: 100, Period: time.Second}},
		StateKey: key, TTL: 2 * time.Second, FailureMode: limiter.FailOpen})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}

func identity(i int) string { return fmt.Sprintf("user-%08d", i) }

func measureAlgorithm(ctx context.Context, rdb *redis.Client, srv *server, c config, alg limiter.Algorithm) (row, error) {
	p, err := policyFor(alg)
	if err != nil {
		return row{}, err
	}
	r := row{name: p.Script().Name}
	keys := p.Keys("user-__rand_int__", "")
	var args []string
	for _, a := range p.Args(1, false) {
		args = append(args, fmt.Sprint(a))
	}
	if r.ceiling, r.redisUS, err = redisBenchmark(ctx, rdb, srv, c, p.Script().Source, keys, args); err != nil {
		return r, err
	}
	for _, piped := range []bool{false, true} {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return r, fmt.Errorf("flushall: %w", err)
		}
		l, err := limiter.New(rdb, limiter.Options{Pipelining: piped, Workers: c.workers, Timeout: time.Second})
		if err != nil {
			return r, fmt.Errorf("limiter: %w", err)
		}
		s, err := drive(ctx, c, func(ctx context.Context, i int) error {
			if d := l.Check(ctx, p, limiter.Request{Identity: identity(i)}); d.WithoutRedis() {
				return fmt.Errorf("check failed: %w", d.Err)
			}
			return nil
		})
		l.Close()
		if err != nil {
			return r, err
		}
		if piped {
			r.piped = s
		} else {
			r.direct = s
		}
	}
	l, err := limiter.New(rdb, limiter.Options{Timeout: time.Second})
	if err != nil {
		return r, fmt.Errorf("limiter: %w", err)
	}
	defer l.Close()
	check := func(p *limiter.Policy) func(int) error {
		return func(i int) error {
			if d := l.Check(ctx, p, limiter.Request{Identity: identity(i)}); d.WithoutRedis() {
				return fmt.Errorf("check failed: %w", d.Err)
			}
			return nil
		}
	}
	if r.bytesPerID, err = bytesPerIdentity(ctx, rdb, c.identities, check(p)); err != nil {
		return r, err
	}
	short, err := shortPolicyFor(alg)
	if err != nil {
		return r, err
	}
	r.bytesShort, err = bytesPerIdentity(ctx, rdb, c.identities, check(short))
	return r, err
}

func measureBaseline(ctx context.Context, rdb *redis.Client, srv *server, c config) (row, error) {
	r := row{name: "baseline (HMGET+HMSET+PEXPIRE)"}
	keys := []string{"{rl:default/api-per-key:user-__rand_int__}:per-second"}
	args := []string{"100", "100", "1", "2000"} // refill/s, capacity, cost, ttl ms
	var err error
	if r.ceiling, r.redisUS, err = redisBenchmark(ctx, rdb, srv, c, baselineSrc, keys, args); err != nil {
		return r, err
	}
	script := redis.NewScript(baselineSrc)
	r.bytesPerID, err = bytesPerIdentity(ctx, rdb, c.identities, func(i int) error {
		key := "{rl:default/api-per-key:" + identity(i) + "}:per-second"
		return script.Run(ctx, rdb, []string{key}, 100, 100, 1, 2000).Err() //nolint:wrapcheck // reported as is.
	})
	return r, err
}
