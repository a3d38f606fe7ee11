package redismemory_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkScanStep measures what one sampling step costs Redis: a step of the default
// SCAN COUNT over 100,000 limiter-shaped keys (a 16-byte value with a TTL). It reports the
// keys a step sizes and the Redis time it takes (INFO commandstats of SCAN, MEMORY USAGE
// and PTTL), per step and per key; at the default of one step a second per primary, the
// per-step figure is the share of a second Redis spends on the manager.
func BenchmarkScanStep(b *testing.B) {
	srv := server(b, protectedArgs...)
	ctx := context.Background()
	populate(ctx, b, srv.Client(), 100_000)
	_, m := standaloneOn(b, srv)
	m.ScanCount = 1000
	m.Round(ctx, true)
	before := commandUsec(ctx, b, srv.Client())
	scannedBefore := scanned(b, m)
	b.ResetTimer()
	for range b.N {
		m.Round(ctx, false)
	}
	b.StopTimer()
	usec := commandUsec(ctx, b, srv.Client()) - before
	keys := scanned(b, m) - scannedBefore
	b.ReportMetric(float64(keys)/float64(b.N), "keys/step")
	b.ReportMetric(usec/float64(b.N), "redis-µs/step")
	b.ReportMetric(usec*1000/float64(keys), "redis-ns/key")
}

// populate writes n limiter-shaped keys of namespace shop.
func populate(ctx context.Context, t testing.TB, c *redis.Client, n int) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < min(start+1000, n); i++ {
				p.Set(ctx, fmt.Sprintf("{rl:shop/orders:caller-%d}:per-second", i), "0123456789abcdef", time.Hour)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// commandUsec is the Redis time spent so far in the commands sampling sends.
func commandUsec(ctx context.Context, t testing.TB, c *redis.Client) float64 {
	t.Helper()
	text, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_scan" && name != "cmdstat_memory|usage" && name != "cmdstat_pttl") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return sum
}
