package adversarial

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// Class: an idempotency key as a free pass (issue 13, item 2). With 3 per minute, one
// Idempotency-Key sent 50 times was forwarded 50 times, and one key on 12 different paths
// was admitted 12 times.
func TestReusedIdempotencyKeyIsNoFreePass(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, limiter.Options{}, newPolicy("pay", alg, 3, time.Minute, idempotent))
			if got := r.count(50, http.MethodPost, "/pay", "X-API-Key", "mallory", "Idempotency-Key", "same"); got != 6 {
				t.Errorf("one key sent 50 times: %d forwarded, want 6 (3 requests and 3 replays of the first)", got)
			}
			got := 0
			for i := range 12 {
				if r.send(http.MethodPost, fmt.Sprintf("/pay/%d", i), "X-API-Key", "trudy", "Idempotency-Key", "same") == http.StatusOK {
					got++
				}
			}
			if got != 3 {
				t.Errorf("one key on 12 paths: %d forwarded, want 3 (the limit)", got)
			}
		})
	}
}

// Class: one policy's idempotency record standing in for another's. Policies of a namespace
// may share an idempotency key template; a request checked by both must be debited by both,
// not replayed by the second from the first's record.
func TestIdempotencyRecordNotSharedAcrossPolicies(t *testing.T) {
	shared := func(tag string) func(*v1alpha1.RateLimitPolicySpec) {
		return func(s *v1alpha1.RateLimitPolicySpec) {
			idempotent(s)
			s.KeyLayout = &v1alpha1.KeyLayout{State: "{rl:${namespace}/shared:${identity}}:" + tag + ":${limit}",
				Idempotency: "{rl:${namespace}/shared:${identity}}:idem:${requestId}"}
		}
	}
	r := newRig(t, limiter.Options{}, newPolicy("a-wide", v1alpha1.AlgorithmGCRA, 10, time.Hour, shared("a")),
		newPolicy("b-tight", v1alpha1.AlgorithmGCRA, 2, time.Hour, shared("b")))
	got := 0
	for i := range 5 {
		if r.send(http.MethodPost, "/pay", "X-API-Key", "mallory", "Idempotency-Key", fmt.Sprintf("id-%d", i)) == http.StatusOK {
			got++
		}
	}
	if got != 2 {
		t.Errorf("5 requests with fresh ids under a 2-per-hour policy: %d forwarded, want 2", got)
	}
}
