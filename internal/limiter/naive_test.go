package limiter

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// naiveLimiter is the application-side limiter this package exists to replace: read the
// count, compare, write count+1. Two round trips with a gap between them (time of check to
// time of use): concurrent callers read the same count, all admit, and overwrite each other's
// increments. Deliberately wrong; there is no artificial delay, the race is the natural one.
type naiveLimiter struct {
	rdb   redis.UniversalClient
	limit int64
	ttl   time.Duration
}

func (n *naiveLimiter) allow(ctx context.Context, key string) (bool, error) {
	count, err := n.rdb.Get(ctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		count, err = 0, nil
	}
	if err != nil {
		return false, err
	}
	if count >= n.limit {
		return false, nil
	}
	// SET with PX: the count and its expiry, as such limiters usually write them.
	if err := n.rdb.Do(ctx, "SET", key, count+1, "PX", n.ttl.Milliseconds()).Err(); err != nil {
		return false, err
	}
	return true, nil
}

// TestNaiveGetThenSetOverAdmits runs the naive limiter under exactly the load of
// TestNoOverAdmission (8 clients x 32 goroutines x 5 attempts, one identity, limit 400) and
// shows that it admits more than the limit, while the FixedWindow script under the same load
// admits exactly the limit.
func TestNaiveGetThenSetOverAdmits(t *testing.T) {
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t)
	mk := func() redis.UniversalClient { return redis.NewClient(srv.Options()) }
	ctx, cancel := context.WithTimeout(context.Background(), loadCaseTimeout)
	defer cancel()

	naive := make([]*naiveLimiter, loadClients)
	for i, c := range loadClientsFor(t, loadClients, mk) {
		naive[i] = &naiveLimiter{rdb: c, limit: loadLimit, ttl: time.Hour}
	}
	// Control: one caller at a time, the naive limiter counts correctly; only concurrency
	// breaks it.
	serial := hammer(ctx, 1, 1, 3*loadLimit, func(ctx context.Context, _ int) outcome {
		ok, err := naive[0].allow(ctx, "naive:{serial}")
		return outcome{allowed: ok, source: "naive", err: err}
	})
	if serial.admitted != loadLimit || len(serial.errs) > 0 {
		t.Fatalf("naive limiter, serial: admitted %d of %d attempts, want %d (errors %v)",
			serial.admitted, serial.attempts, loadLimit, serial.errs)
	}

	res := hammer(ctx, loadClients, loadGoroutines, loadAttempts, func(ctx context.Context, i int) outcome {
		ok, err := naive[i].allow(ctx, "naive:{tenant-42}")
		return outcome{allowed: ok, source: "naive", err: err}
	})
	if len(res.errs) > 0 {
		t.Fatalf("naive limiter: Redis errors: %v", res.errs)
	}

	p := newPolicy(t, FixedWindow, FailClosed, loadLimitFor(t, FixedWindow, srv.Client()))
	limiters := limitersOn(t, loadClientsFor(t, loadClients, mk), Options{Timeout: loadCallTimeout})
	script := hammer(ctx, loadClients, loadGoroutines, loadAttempts, limiterCheck(limiters, p, "tenant-42"))

	over := res.admitted - loadLimit
	t.Logf("naive GET-then-SET admitted %d for limit %d (+%d, +%.0f%%) in %d attempts; "+
		"the FixedWindow script admitted %d under the same load",
		res.admitted, loadLimit, over, 100*float64(over)/loadLimit, res.attempts, script.admitted)
	if res.attempts != loadClients*loadGoroutines*loadAttempts {
		t.Fatalf("naive limiter made %d attempts, want %d", res.attempts, loadClients*loadGoroutines*loadAttempts)
	}
	if res.admitted <= loadLimit {
		t.Errorf("naive limiter admitted %d, want more than %d: the GET-then-SET race did not show", res.admitted, loadLimit)
	}
	if n := script.bySource[string(SourceRedis)]; script.admitted != loadLimit || n != script.attempts {
		t.Errorf("script under the same load: admitted %d (want %d), %d of %d from Redis (%s)",
			script.admitted, loadLimit, n, script.attempts, fmt.Sprint(script.errs))
	}
}
