package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkCheck measures Check against a real redis-server for every algorithm, one round
// trip per check (direct) and coalesced into pipelines, with 64 concurrent callers over 10,000
// identities, one limit. redis-µs/check is the scripts' own time on the server per decision
// (EVALSHA's usec over the sub-benchmark's checks: what sizes a Redis shard; a pipeline's
// checks share calls, so its redis-µs/call is per shared call). The full table with the
// redis-benchmark ceiling is `make bench`.
func BenchmarkCheck(b *testing.B) {
	rdb := benchRedis(b)
	for _, alg := range algorithms {
		p := newPolicy(b, alg, FailOpen, Limit{Name: "per-second", Requests: 100, Period: time.Second})
		for _, piped := range []bool{false, true} {
			name := fmt.Sprintf("%s/pipelined=%v", alg, piped)
			b.Run(name, func(b *testing.B) {
				if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
					b.Fatal(err)
				}
				checkParallel(b, newLimiter(b, rdb, Options{Pipelining: piped, Timeout: time.Second}), p)
				b.ReportMetric(evalshaMicros(b, rdb), "redis-µs/call")
				b.ReportMetric(evalshaStat(b, rdb, "usec=")/float64(b.N), "redis-µs/check")
			})
		}
	}
}

// benchRedis starts a redis-server and returns a client on it sized for 64 callers, with
// socket deadlines (as redisconn builds it).
func benchRedis(b *testing.B) *redis.Client {
	b.Helper()
	srv, _ := standalone(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// checkParallel runs b.N checks of p from 64 callers (32 x GOMAXPROCS 2) over 10,000
// identities, failing on any decided without Redis.
func checkParallel(b *testing.B, l *Limiter, p *Policy) {
	b.Helper()
	b.SetParallelism(32)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			id := fmt.Sprintf("user-%08d", rng.IntN(10000))
			if d := l.Check(context.Background(), p, Request{Identity: id}); d.WithoutRedis() {
				b.Fatalf("check failed: %v", d.Err)
			}
		}
	})
}

// BenchmarkKeys measures building the keys of one check (template expansion + encoding).
func BenchmarkKeys(b *testing.B) {
	p := newPolicy(b, SlidingWindow, FailOpen, perHour("a", 1), perHour("b", 2))
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Keys("user-00001234", "")
	}
}

// BenchmarkFailOpenBreakerOpen measures a check while the circuit is open: the cost a dead
// Redis adds to each request.
func BenchmarkFailOpenBreakerOpen(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 10 * time.Millisecond})
	b.Cleanup(func() { _ = rdb.Close() })
	l := newLimiter(b, rdb, Options{Timeout: 20 * time.Millisecond})
	p := newPolicy(b, TokenBucket, FailOpen, perHour("a", 5))
	for range 10 { // open the breaker
		l.Check(context.Background(), p, Request{Identity: "x"})
	}
	b.ReportAllocs()
	for b.Loop() {
		if d := l.Check(context.Background(), p, Request{Identity: "x"}); d.Source != SourceFailOpen {
			b.Fatalf("want FailOpen, got %s", d.Source)
		}
	}
}

// BenchmarkHotFilterObserve is what leases add to a cold identity's check: one hash and
// one compare-and-swap in the hot filter (callers in parallel, 10000 identities).
func BenchmarkHotFilterObserve(b *testing.B) {
	f := newHotFilter()
	p := &Policy{serial: 1}
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%08d", i)
	}
	now := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			f.observe(p, ids[i%len(ids)], now)
			i++
		}
	})
}
