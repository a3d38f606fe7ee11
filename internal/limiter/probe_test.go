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

// TestBreakerProbeAcceptsAnyAnswer: the breaker's probe asks whether the node answers, and any
// answer but "I serve no one" (LOADING, BUSY, ...) says it does. Here the ACL user may not
// PING (its probe is answered NOPERM): once Redis is back after a kill, checks must be decided
// by Redis again within seconds, not refused by a breaker whose probe can never succeed.
func TestBreakerProbeAcceptsAnyAnswer(t *testing.T) {
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t, redistest.WithArgs("--user", ceUser, "on", ">"+cePassword, "~*", "&*", "+@all", "-ping"))
	opts := srv.Options()
	opts.Username, opts.Password = ceUser, cePassword
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err == nil || !redis.HasErrorPrefix(err, "NOPERM") {
		t.Fatalf("PING as %s: %v, want NOPERM", ceUser, err)
	}
	l := newLimiter(t, rdb, Options{Timeout: 200 * time.Millisecond, BreakerCooldown: 50 * time.Millisecond})
	p := newPolicy(t, TokenBucket, FailClosed, perHour("hourly", 1000))
	mustCheck(t, l, p, Request{Identity: "a"})

	srv.Kill()
	if _, err := waitFor(5*time.Second, time.Millisecond, func() error {
		if d := l.Check(context.Background(), p, Request{Identity: "a"}); !errors.Is(d.Err, ErrCircuitOpen) {
			return fmt.Errorf("decision %s: %w", d.Source, d.Err)
		}
		return nil
	}); err != nil {
		t.Fatalf("the breaker did not open against a dead Redis: %v", err)
	}
	srv.Restart(t)
	waitRedisAgain(t, l, p, "a", 5*time.Second, "Redis is back, but checks are still refused")
}
