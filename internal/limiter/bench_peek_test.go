package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkPeek sets a peek against a check, same run, same Redis, one round trip each, 64
// callers over 10,000 identities, TokenBucket with two limits (the peek script runs each
// limit's body twice and writes nothing; the check runs it once and writes). redis-µs/call is
// the script's own cost on the server (EVALSHA's usec_per_call over the run).
func BenchmarkPeek(b *testing.B) {
	rdb := benchRedis(b)
	p := newPolicy(b, TokenBucket, FailOpen, perHour("hour", 1_000_000), Limit{Name: "day", Requests: 10_000_000, Period: 24 * time.Hour})
	for _, peek := range []bool{false, true} {
		name := map[bool]string{false: "check", true: "peek"}[peek]
		b.Run(name, func(b *testing.B) {
			l := newLimiter(b, rdb, Options{Timeout: time.Second})
			if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
				for pb.Next() {
					r := Request{Identity: fmt.Sprintf("user-%08d", rng.IntN(10000)), Cost: 1}
					var d Decision
					if peek {
						d = l.Peek(context.Background(), p, r).Decision
					} else {
						d = l.Check(context.Background(), p, r)
					}
					if d.WithoutRedis() {
						b.Fatalf("%s failed: %v", name, d.Err)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(evalshaMicros(b, rdb), "redis-µs/call")
		})
	}
}
