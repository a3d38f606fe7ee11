package sidecartest

import (
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// ClosedAddr is a loopback address nothing listens on (until something does).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// ClosedEngine is an Engine holding policies whose limiter points at a closed port: every
// check that reaches Redis fails within milliseconds and the policy's failure mode decides.
// A small deny cache answers repeated denials. Fuzz tests use it to run every input through
// a front without a redis-server.
func ClosedEngine(t testing.TB, policies ...*v1alpha1.RateLimitPolicy) *engine.Engine {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: ClosedAddr(t), ContextTimeoutEnabled: true,
		DialTimeout: 5 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(rdb, limiter.Options{Timeout: 5 * time.Millisecond, DenyCacheSize: 16})
	if err != nil {
		t.Fatalf("limiter: %v", err)
	}
	t.Cleanup(lim.Close)
	e := &engine.Engine{Store: Store(t, policies...)}
	e.SetLimiter(lim)
	return e
}
