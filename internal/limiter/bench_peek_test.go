package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkPeek sets a peek against a check, same run, same Redis, one round trip each, 64
// callers over 10,000 identities, TokenBucket with two limits (the peek script runs each
// limit's body twice and writes nothing; the check runs it once and writes). redis-µs/call is
// the script's own cost on the server (EVALSHA's usec_per_call over the run).
func BenchmarkPeek(b *testing.B) {
	rdb := benchRedis(b)
	p := newPolicy(b, TokenBucket, FailOpen, perHour("hour", 1_000_000), Limit{Name: "day", Requests: 10_000_000, Period: 24 * time.Hour})
	benchVersusCheck(b, rdb, p, "peek", func(l *Limiter, id string) error {
		if d := l.Peek(context.Background(), p, Request{Identity: id, Cost: 1}).Decision; d.WithoutRedis() {
			return d.Err
		}
		return nil
	})
}

// benchVersusCheck runs a check of p, then other, as sub-benchmarks "check" and name of one
// run on rdb: 64 callers over 10,000 identities, each reporting the scripts' own cost on the
// server: per script call (redis-µs/call, EVALSHA's usec_per_call over the sub-benchmark)
// and per operation (redis-µs/op: every EVALSHA's time over b.N, for an operation of
// several calls).
func benchVersusCheck(b *testing.B, rdb *redis.Client, p *Policy, name string, other func(l *Limiter, id string) error) {
	check := func(l *Limiter, id string) error {
		if d := l.Check(context.Background(), p, Request{Identity: id, Cost: 1}); d.WithoutRedis() {
			return d.Err
		}
		return nil
	}
	for _, c := range []struct {
		name string
		call func(l *Limiter, id string) error
	}{{"check", check}, {name, other}} {
		b.Run(c.name, func(b *testing.B) {
			l := newLimiter(b, rdb, Options{Timeout: time.Second})
			if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
				for pb.Next() {
					if err := c.call(l, fmt.Sprintf("user-%08d", rng.IntN(10000))); err != nil {
						b.Fatalf("%s failed: %v", c.name, err)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(evalshaMicros(b, rdb), "redis-µs/call")
			b.ReportMetric(evalshaStat(b, rdb, "usec=")/float64(b.N), "redis-µs/op")
		})
	}
}
