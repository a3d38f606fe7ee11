package httpcheck_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestCheckAPIPeek: "peek": true answers what a check would decide, with every limit's
// usage, and debits nothing: 20 peeks of a fresh caller leave all 5, a peek after 3 checks
// reads 3 used and 2 remaining, a peek of cost 3 is denied naming the limit (429, the wait
// to the next tokens) while a check of cost 2 still passes, and a peek with a request id is
// refused naming the field.
func TestCheckAPIPeek(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 5, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Cost = &v1alpha1.Cost{Default: 1}
	}))
	h := &httpcheck.Handler{Engine: rig.Engine}
	for range 20 {
		peekReads(t, h, `{"policy":"orders","identity":"a","peek":true}`, wantUsage(5, 0))
	}
	for range 3 {
		checkAdmittedOf(t, h, `{"policy":"orders","identity":"a"}`)
	}
	if got := peekReads(t, h, `{"policy":"orders","identity":"a","peek":true}`, wantUsage(5, 3)); got.ResetAfterMs < 35000 {
		t.Fatalf("peek after 3: full again in %d ms, want about 36000", got.ResetAfterMs)
	}
	peekDenied(t, h)
	if code, resp, _, _ := scCheck(t, h, `{"policy":"orders","identity":"a","cost":2}`); code != http.StatusOK || resp.Remaining != 0 {
		t.Fatalf("a check of cost 2 after the peeks: %d %+v", code, resp)
	}
	code, _, _, body := scCheck(t, h, `{"policy":"orders","identity":"a","peek":true,"requestId":"r1"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "requestId") {
		t.Fatalf("peek with a request id: %d %s", code, body)
	}
}

// peekReads asserts that the peek body is admitted, debiting nothing, and reads want (but
// for the time to reset, which it returns).
func peekReads(t *testing.T, h http.Handler, body string, want usage.Limit) usage.Limit {
	t.Helper()
	code, resp, _, _ := scCheck(t, h, body)
	if code != http.StatusOK || !resp.Peek || resp.Remaining != want.Remaining || len(resp.Limits) != 1 {
		t.Fatalf("%s: %d %+v", body, code, resp)
	}
	got := resp.Limits[0]
	if reset := got.ResetAfterMs; want.Used == 0 && reset != 0 || want.Used > 0 && reset == 0 {
		t.Fatalf("%s: %+v, want %+v", body, got, want)
	}
	want.ResetAfterMs = got.ResetAfterMs
	if got != want {
		t.Fatalf("%s: %+v, want %+v", body, got, want)
	}
	return got
}

// peekDenied asserts that a peek of cost 3 with 2 left is denied as a check would be: 429
// naming the limit, 2 remaining, and a wait of 12 s (the one token missing, at 5 per
// minute), the limit's own wait the same.
func peekDenied(t *testing.T, h http.Handler) {
	t.Helper()
	code, resp, hdr, _ := scCheck(t, h, `{"policy":"orders","identity":"a","peek":true,"cost":3}`)
	if code != http.StatusTooManyRequests || resp.Allowed || resp.Limit != "per-minute" || resp.Remaining != 2 {
		t.Fatalf("peek of cost 3 with 2 left: %d %+v", code, resp)
	}
	if resp.RetryAfterMs < 11000 || resp.RetryAfterMs > 12000 || resp.Limits[0].RetryAfterMs != resp.RetryAfterMs || hdr.Get("Retry-After") != "12" {
		t.Fatalf("peek of cost 3 with 2 left: wait %d ms (limit: %d), Retry-After %q", resp.RetryAfterMs, resp.Limits[0].RetryAfterMs, hdr.Get("Retry-After"))
	}
}

// wantUsage is the usage of the per-minute limit of quota with used spent, nothing waiting.
func wantUsage(quota, used int64) usage.Limit {
	return usage.Limit{Name: "per-minute", Quota: quota, Used: used, Remaining: quota - used}
}

// checkAdmittedOf asserts that body is admitted.
func checkAdmittedOf(t *testing.T, h http.Handler, body string) {
	t.Helper()
	if code, resp, _, _ := scCheck(t, h, body); code != http.StatusOK || !resp.Allowed || resp.Peek {
		t.Fatalf("%s: %d %+v", body, code, resp)
	}
}
