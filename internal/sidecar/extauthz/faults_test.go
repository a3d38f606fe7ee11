package extauthz_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestCheckRedisKilled: with Redis down, FailOpen admits (without headers: no limit was
// read) and FailClosed answers 429 naming the outage; after a restart Redis decides again.
func TestCheckRedisKilled(t *testing.T) {
	mode := func(m v1alpha1.FailureMode) func(*v1alpha1.RateLimitPolicySpec) {
		return func(s *v1alpha1.RateLimitPolicySpec) { s.FailureMode = m }
	}
	h := start(t, limiter.Options{Timeout: 50 * time.Millisecond},
		sidecartest.Policy("open", 1000, mode(v1alpha1.FailureModeFailOpen)),
		sidecartest.Policy("closed", 1000, mode(v1alpha1.FailureModeFailClosed)))
	closed := request{path: "/api/closed", header: []string{"X-API-Key", "alice"}}
	wantOK(t, "before the kill", h.check(t, closed), true)
	h.rig.Redis.Kill()
	for range 3 {
		wantOK(t, "FailOpen", h.check(t, request{path: "/api/open", header: []string{"X-API-Key", "alice"}}), false)
		a := h.check(t, closed)
		want429(t, "FailClosed", a)
		if !strings.Contains(a.body, "Redis is unavailable") || !strings.Contains(a.body, "FailClosed") {
			t.Errorf("FailClosed body %q, want the Redis-unavailable reason", a.body)
		}
	}
	h.rig.Redis.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		a := h.check(t, closed)
		if a.status == 200 && a.header["RateLimit"] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back but checks still fail: %d %q", a.status, a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
