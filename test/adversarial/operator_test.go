package adversarial

import (
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// Class: an operator editing policies under load. While 8 callers hammer one identity, the
// policy's requests flip between 20 and 10 per hour and another policy changes 30 times:
// never more than the largest limit in force is admitted in the window, a lowered limit is
// honoured at once (no negative remaining lets more through), and every answer is 200 or 429.
func TestEditsUnderLoadNeverOverAdmit(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			api := func(n int64) *v1alpha1.RateLimitPolicy { return newPolicy("api", alg, n, time.Hour, onPaths("/api")) }
			other := func(n int64) *v1alpha1.RateLimitPolicy {
				return newPolicy("other", v1alpha1.AlgorithmGCRA, n, time.Minute, onPaths("/other"))
			}
			r := newRig(t, limiter.Options{Pipelining: true, DenyCacheSize: 100}, api(20), other(1))
			got := r.hammer(8, 40, "/api/x", []string{"X-API-Key", "alice"}, func() {
				for i := range 30 {
					r.load(api(20-10*int64(i%2)), other(int64(1+i)))
					time.Sleep(2 * time.Millisecond)
				}
			})
			onlyAdmitOrDeny(t, got)
			if got[http.StatusOK] > 20 {
				t.Errorf("%d admitted within one hour under edits between 20 and 10 per hour: over-admission %d", got[http.StatusOK], got[http.StatusOK]-20)
			}
			r.load(api(10))
			if n := r.count(5, http.MethodGet, "/api/x", "X-API-Key", "alice"); n != 0 {
				t.Errorf("after lowering to 10 per hour with %d used: %d more admitted", got[http.StatusOK], n)
			}
		})
	}
}
