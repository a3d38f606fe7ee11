package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAdjust sets an adjustment (a refund of 1, each under a new request id, so each
// runs the whole script and records its reply) against a check, same run, same Redis, one
// round trip each, 64 callers over 10,000 identities, FixedWindow with two limits.
// redis-µs/call is the script's own cost on the server (EVALSHA's usec_per_call over the
// run).
func BenchmarkAdjust(b *testing.B) {
	rdb := benchRedis(b)
	p := newPolicy(b, FixedWindow, FailOpen, perHour("hour", 1_000_000), Limit{Name: "day", Requests: 10_000_000, Period: 24 * time.Hour})
	var seq atomic.Int64
	for _, adjust := range []bool{false, true} {
		name := map[bool]string{false: "check", true: "refund"}[adjust]
		b.Run(name, func(b *testing.B) {
			l := newLimiter(b, rdb, Options{Timeout: time.Second})
			if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
				for pb.Next() {
					id := fmt.Sprintf("user-%08d", rng.IntN(10000))
					if !adjust {
						if d := l.Check(context.Background(), p, Request{Identity: id}); d.WithoutRedis() {
							b.Fatalf("check failed: %v", d.Err)
						}
						continue
					}
					a := Adjustment{Op: OpRefund, Identity: id, Amount: 1, RequestID: fmt.Sprintf("bench-%d", seq.Add(1))}
					if _, err := l.Adjust(context.Background(), p, a); err != nil {
						b.Fatalf("refund failed: %v", err)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(evalshaMicros(b, rdb), "redis-µs/call")
		})
	}
}
