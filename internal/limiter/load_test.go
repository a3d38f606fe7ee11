package limiter

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestNoOverAdmission: 8 independent clients (separate connection pools and Limiters, like 8
// pods) x 32 goroutines hammer one identity whose limit is 400 per hour, 1280 attempts in all,
// released at the same moment. Exactly 400 are admitted, each admission saw a distinct
// remaining count (the checks were serialized in Redis), and every decision came from Redis.
// For every algorithm, on a standalone server and a 3-primary Cluster, with and without
// pipelining.
func TestNoOverAdmission(t *testing.T) {
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t)
	cluster := startClusterT(t)
	topologies := []struct {
		name string
		mk   func() redis.UniversalClient
	}{
		{"standalone", func() redis.UniversalClient { return redis.NewClient(srv.Options()) }},
		{"cluster", func() redis.UniversalClient { return redis.NewClusterClient(cluster.ClusterOptions()) }},
	}
	clock := srv.Client() // both topologies run on this machine's clock
	for _, topo := range topologies {
		for _, pipelining := range []bool{false, true} {
			for _, alg := range algorithms {
				name := fmt.Sprintf("%s/pipelining=%v/%s", topo.name, pipelining, alg)
				t.Run(name, func(t *testing.T) {
					p := newPolicy(t, alg, FailClosed, loadLimitFor(t, alg, clock))
					clients := loadClientsFor(t, loadClients, topo.mk)
					limiters := limitersOn(t, clients, Options{Pipelining: pipelining, Timeout: loadCallTimeout})
					ctx, cancel := context.WithTimeout(context.Background(), loadCaseTimeout)
					defer cancel()

					res := hammer(ctx, loadClients, loadGoroutines, loadAttempts, limiterCheck(limiters, p, "tenant-42"))

					t.Logf("%s: %d decisions in %s = %.0f decisions/s, admitted %d of limit %d",
						name, res.attempts, res.elapsed.Round(1e6), res.perSecond(), res.admitted, loadLimit)
					if want := loadClients * loadGoroutines * loadAttempts; res.attempts != want || want < 3*loadLimit {
						t.Fatalf("made %d attempts, want %d (>= 3 x %d)", res.attempts, want, loadLimit)
					}
					if n := res.bySource[string(SourceRedis)]; n != res.attempts {
						t.Fatalf("%d of %d decisions came from Redis, by source %v; errors: %v",
							n, res.attempts, res.bySource, res.errs)
					}
					// No refill: the first refill of 400/hour comes 9 s after the first debit.
					if res.elapsed >= p.Limits[0].Period/loadLimit {
						t.Fatalf("the load took %s, long enough for a refill; the exact count below would not hold", res.elapsed)
					}
					if res.admitted != loadLimit {
						t.Fatalf("admitted %d, want exactly %d", res.admitted, loadLimit)
					}
					assertExactlyOnce(t, res.remaining, loadLimit)
				})
			}
		}
	}
}
