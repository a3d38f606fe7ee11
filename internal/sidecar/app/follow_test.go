package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/app"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestRunFollowsTheSnapshotsRedis: a sidecar without --redis-addrs takes Redis from its
// snapshot, and when a new snapshot names another Redis (its namespace moved to a
// RedisBackend) it builds a client for it, installs a new limiter (checks then go there,
// from fresh counters), logs it, and closes the old client; a new snapshot naming the same
// Redis (a policy edit) builds nothing.
func TestRunFollowsTheSnapshotsRedis(t *testing.T) {
	oldRedis, newRedis := redistest.StartServer(t), redistest.StartServer(t)
	oldAdmin, newAdmin := oldRedis.Client(), newRedis.Client() // one connection each: the test's own
	file := filepath.Join(t.TempDir(), "snapshot.json")
	publish(t, file, oldRedis.Addr(), 5)
	log, logs := sidecartest.Logger()
	a := app.New(app.Config{Namespace: sidecartest.Namespace, SnapshotFile: file, MetricsAddr: sidecartest.ClosedAddr(t),
		HTTP: httpserver.DefaultLimits(), ShutdownGrace: time.Second, Log: log,
		Limiter: limiter.Options{Timeout: time.Second}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	waitDecided(t, a, "the first check decided on the old Redis")
	for want := int64(3); want >= 2; want-- { // 5 a minute; the wait's check took one
		if d := decide(t, a); d.Source != limiter.SourceRedis || d.Remaining != want {
			t.Fatalf("a check on the old Redis: %+v, want %d remaining", d, want)
		}
	}
	if n := dbSize(t, newAdmin); n != 0 {
		t.Fatalf("the new Redis holds %d keys before the move", n)
	}

	publish(t, file, newRedis.Addr(), 5)
	wait.Eventually(t, 10*time.Second, "a check decided on the new Redis", func() error {
		if dbSize(t, newAdmin) == 0 {
			decide(t, a)
			return fmt.Errorf("the new Redis holds no key yet")
		}
		return nil
	})
	if d := decide(t, a); d.Source != limiter.SourceRedis || d.Remaining != 3 {
		t.Errorf("the second check on the new Redis: %+v; want decided by Redis from a fresh counter (3 remaining)", d)
	}
	wait.Eventually(t, 10*time.Second, "the old client closed", func() error {
		if n := clients(t, oldAdmin); n > 1 { // the test's own
			return fmt.Errorf("%d connections to the old Redis", n)
		}
		return nil
	})
	publish(t, file, newRedis.Addr(), 6) // a policy edit: same Redis
	wait.Eventually(t, 10*time.Second, "the edit loaded", func() error {
		if d := decide(t, a); d.Limit != 6 {
			return fmt.Errorf("limit %d", d.Limit)
		}
		return nil
	})
	if n := strings.Count(strings.Join(logs.All(), "\n"), "the snapshot names another Redis"); n != 1 {
		t.Errorf("%d logs of a new Redis, want 1:\n%s", n, strings.Join(logs.All(), "\n"))
	}
}

// publish writes the snapshot of policy orders (requests a minute) naming the standalone
// Redis at addr as the kubelet updates a mounted file: a new file renamed over it.
func publish(t *testing.T, file, addr string, requests int64) {
	t.Helper()
	doc := snapshottest.DocumentFor(t, sidecartest.Namespace, snapshottest.Standalone(addr), sidecartest.Policy("orders", requests))
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// decide checks one request of caller alice against policy orders through the app's engine.
func decide(t *testing.T, a *app.App) limiter.Decision {
	t.Helper()
	set := a.Engine.Store.Current()
	if set == nil || set.Rule("orders") == nil {
		return limiter.Decision{}
	}
	o := a.Engine.Decide(t.Context(), "test", set.Rule("orders"), engine.Check{Identity: "alice", HasIdentity: true, Cost: 1})
	return o.Decision
}

// waitDecided waits until a check is decided by Redis.
func waitDecided(t *testing.T, a *app.App, what string) {
	t.Helper()
	wait.Eventually(t, 10*time.Second, what, func() error {
		if d := decide(t, a); d.Source != limiter.SourceRedis {
			return fmt.Errorf("decided by %q: %w", d.Source, d.Err)
		}
		return nil
	})
}

// dbSize is the number of keys on c's server.
func dbSize(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	n, err := c.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clients is the number of connections to c's server (c's own included).
func clients(t *testing.T, c *redis.Client) int {
	t.Helper()
	list, err := c.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Split(strings.TrimSpace(list), "\n"))
}
