package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
)

// BenchmarkCheckCalendar sets a calendar day against a 24h period, same run, same Redis,
// FixedWindow, pipelined, 64 callers over 10,000 identities: what a calendar window costs a
// check (its ARGV is built per call, and the script parses and compares the window).
func BenchmarkCheckCalendar(b *testing.B) {
	srv, _ := standalone(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = rdb.Close() })
	day, err := calendar.New(calendar.Day, "Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		limit Limit
	}{
		{"period=24h", Limit{Name: "daily", Requests: 1 << 40, Period: 24 * time.Hour}},
		{"calendar=Day", Limit{Name: "daily", Requests: 1 << 40, Calendar: &day}},
	} {
		p := newPolicy(b, FixedWindow, FailOpen, c.limit)
		b.Run(c.name, func(b *testing.B) {
			l := newLimiter(b, rdb, Options{Pipelining: true, Timeout: time.Second})
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
				for pb.Next() {
					id := fmt.Sprintf("user-%08d", rng.IntN(10000))
					if d := l.Check(context.Background(), p, Request{Identity: id}); d.WithoutRedis() || !d.Allowed {
						b.Fatalf("check: %+v", d)
					}
				}
			})
		})
	}
}
