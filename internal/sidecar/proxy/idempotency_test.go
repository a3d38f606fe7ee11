package proxy_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// An Idempotency-Key must not be a free pass: with 3 per minute, one key sent 50 times was
// forwarded 50 times, and one key on 12 different paths was admitted 12 times.
func TestProxyIdempotencyKeyIsNoFreePass(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.IdempotentPolicy("pay", 3))
	p := newProxyRig(t, rig)
	forwarded := 0
	for range 50 {
		if resp, _ := p.get(t, "/pay", "X-API-Key", "alice", "Idempotency-Key", "same"); resp.StatusCode == http.StatusOK {
			forwarded++
		}
	}
	// The first request, its 3 replays (the default maxReplays), then the 2 left of the limit.
	if forwarded != 6 || p.hits.Load() != 6 {
		t.Errorf("one key sent 50 times: %d answered 200, upstream saw %d; want 6 (3 requests + 3 replays)", forwarded, p.hits.Load())
	}
	forwarded = 0
	for i := range 12 {
		if resp, _ := p.get(t, fmt.Sprintf("/path-%d", i), "X-API-Key", "bob", "Idempotency-Key", "same"); resp.StatusCode == http.StatusOK {
			forwarded++
		}
	}
	if forwarded != 3 {
		t.Errorf("one key on 12 different paths: %d forwarded, want 3 (the limit)", forwarded)
	}
}
