package adversarial

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// Class: Redis failing halfway. Redis is SIGKILLed in the middle of a burst against a
// FailClosed policy: what was admitted before the kill plus what the failure mode admits
// after it never exceeds the limit, and every answer is 200 or 429.
func TestRedisKilledMidBurstNeverOverAdmits(t *testing.T) {
	r := newRig(t, limiter.Options{Pipelining: true, Timeout: 200 * time.Millisecond},
		newPolicy("login", v1alpha1.AlgorithmGCRA, 30, time.Hour))
	got := r.hammer(8, 25, "/login", []string{"X-API-Key", "mallory"}, func() {
		deadline := time.Now().Add(5 * time.Second)
		for r.upstream.hits.Load() < 15 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		r.redis.Kill()
	})
	onlyAdmitOrDeny(t, got)
	if got[http.StatusOK] > 30 {
		t.Errorf("%d admitted by a 30-per-hour FailClosed policy across a Redis kill", got[http.StatusOK])
	}
}

// Class: Redis failing halfway. SCRIPT FLUSH runs over and over during a burst: every check
// is answered by the script exactly once (NOSCRIPT, then EVAL once), so exactly the limit is
// admitted, not more (a script run twice would debit twice, not admit more, but a lost
// debit would admit more) and not less.
func TestScriptFlushMidBurstAdmitsExactlyTheLimit(t *testing.T) {
	// A generous timeout: a check Redis ran but answered late would be a FailClosed denial
	// after its debit, which this count could not tell from a double debit.
	r := newRig(t, limiter.Options{Pipelining: true, Timeout: 5 * time.Second}, newPolicy("api", v1alpha1.AlgorithmTokenBucket, 100, time.Hour))
	got := r.hammer(8, 40, "/api", []string{"X-API-Key", "alice"}, func() {
		deadline := time.Now().Add(20 * time.Second)
		for r.upstream.hits.Load() < 100 && time.Now().Before(deadline) {
			_ = r.rdb.ScriptFlush(context.Background()).Err()
			time.Sleep(2 * time.Millisecond)
		}
	})
	onlyAdmitOrDeny(t, got)
	if got[http.StatusOK] != 100 {
		t.Errorf("%d admitted of 320 by a 100-per-hour limit under SCRIPT FLUSH, want exactly 100", got[http.StatusOK])
	}
}
