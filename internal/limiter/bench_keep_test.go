package limiter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkCheckKeepUsage measures Check of TokenBucket and GCRA with Spec.KeepUsage off
// and on (the state a '>dd' value, read and written through keep_usage.lua) against a real
// redis-server, 64 concurrent callers over 10,000 identities, one round trip per check. It
// reports, beside ns/op, the script's own cost on the server: redis-µs/call, EVALSHA's
// usec_per_call from INFO commandstats over the run, the figure the load of other
// processes on the machine moves least.
func BenchmarkCheckKeepUsage(b *testing.B) {
	rdb := benchRedis(b)
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		for _, keep := range []bool{false, true} {
			p := newPolicy(b, alg, FailOpen, Limit{Name: "per-second", Requests: 100, Period: time.Second})
			if keep {
				c := p.Spec
				c.KeepUsage = true
				var err error
				if p, err = NewPolicy(c); err != nil {
					b.Fatalf("NewPolicy: %v", err)
				}
			}
			b.Run(fmt.Sprintf("%s/keep=%v", alg, keep), func(b *testing.B) {
				l := newLimiter(b, rdb, Options{Timeout: time.Second})
				if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
					b.Fatal(err)
				}
				checkParallel(b, l, p)
				b.StopTimer()
				b.ReportMetric(evalshaMicros(b, rdb), "redis-µs/call")
			})
		}
	}
}

// evalshaMicros is EVALSHA's usec_per_call in INFO commandstats.
func evalshaMicros(b *testing.B, rdb *redis.Client) float64 {
	return evalshaStat(b, rdb, "usec_per_call=")
}

// evalshaStat is the field of EVALSHA's line in INFO commandstats that begins with prefix
// (as "usec=" or "usec_per_call="), 0 when there is none.
func evalshaStat(b *testing.B, rdb *redis.Client, prefix string) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
			if v, ok := strings.CutPrefix(f, prefix); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return x
			}
		}
	}
	return 0
}
