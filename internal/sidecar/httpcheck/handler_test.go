package httpcheck_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// scCheck posts body to the check handler and decodes the answer.
func scCheck(t *testing.T, h http.Handler, body string) (int, checkwire.Response, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, httpcheck.Path, strings.NewReader(body)))
	var resp checkwire.Response
	if rec.Code == http.StatusOK || rec.Code == http.StatusTooManyRequests {
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("decode %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, resp, rec.Header(), rec.Body.String()
}

func TestCheckAPIBurstThenDeny(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 5))
	h := &httpcheck.Handler{Engine: rig.Engine}
	for i := range 5 {
		checkAdmitted(t, h, `{"policy":"orders","identity":"alice"}`, int64(4-i))
	}
	code, resp, hdr, _ := scCheck(t, h, `{"policy":"orders","identity":"alice"}`)
	// 5 per minute: the next token is 12s away.
	if code != http.StatusTooManyRequests || resp.Allowed || resp.Limit != "per-minute" || resp.RetryAfterMs < 11000 || resp.RetryAfterMs > 12000 {
		t.Fatalf("6th request: %d %+v", code, resp)
	}
	if hdr.Get("Retry-After") != "12" {
		t.Errorf("Retry-After = %q, want 12", hdr.Get("Retry-After"))
	}
	if code, resp, _, _ := scCheck(t, h, `{"policy":"orders","identity":"bob"}`); code != http.StatusOK || resp.Remaining != 4 {
		t.Errorf("another identity is independent: %d %+v", code, resp)
	}
}

// checkAdmitted asserts that body is admitted by Redis with remaining left of 5, and the headers say so.
func checkAdmitted(t *testing.T, h http.Handler, body string, remaining int64) {
	t.Helper()
	code, resp, hdr, _ := scCheck(t, h, body)
	if code != http.StatusOK || !resp.Allowed || resp.Remaining != remaining || resp.Quota != 5 || resp.Source != "Redis" {
		t.Fatalf("%s: %d %+v", body, code, resp)
	}
	want := fmt.Sprintf(`"orders/per-minute";r=%d;t=`, remaining)
	if !strings.HasPrefix(hdr.Get("RateLimit"), want) || hdr.Get("RateLimit-Policy") != `"orders/per-minute";q=5;w=60` {
		t.Fatalf("%s: headers %v", body, hdr)
	}
}

func TestCheckAPICost(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("heavy", 10, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Cost = &v1alpha1.Cost{Default: 1, Max: new(int64(4))}
	}))
	h := &httpcheck.Handler{Engine: rig.Engine}
	// Cost: 4 of 10 twice, then 4 more does not fit; over cost.max is refused.
	for i, want := range []int{200, 200, 429} {
		if code, _, _, _ := scCheck(t, h, `{"policy":"heavy","identity":"a","cost":4}`); code != want {
			t.Errorf("heavy %d: %d, want %d", i, code, want)
		}
	}
	if code, _, _, body := scCheck(t, h, `{"policy":"heavy","identity":"a","cost":5}`); code != http.StatusBadRequest || !strings.Contains(body, "cost.max") {
		t.Errorf("cost over max: %d %s", code, body)
	}
}

func TestCheckAPIIdempotentRetry(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("pay", 2, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: time.Minute}}
	}))
	h := &httpcheck.Handler{Engine: rig.Engine}
	for range 3 {
		if code, resp, _, _ := scCheck(t, h, `{"policy":"pay","identity":"a","requestId":"r1"}`); code != 200 || resp.Remaining != 1 {
			t.Fatalf("retry of r1: %d %+v", code, resp)
		}
	}
	if _, resp, _, _ := scCheck(t, h, `{"policy":"pay","identity":"a","requestId":"r2"}`); !resp.Allowed || resp.Remaining != 0 || resp.Replayed {
		t.Fatalf("r2: %+v", resp)
	}
}

func TestCheckAPIBadInput(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 5))
	h := &httpcheck.Handler{Engine: rig.Engine}
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{`{"policy":"nope","identity":"a"}`, 404, `no policy \"nope\"`},
		{`{"policy":"orders","identity":"a"`, 400, "not a check request"},
		{`{"policy":"orders","idenity":"a"}`, 400, `unknown field \"idenity\"`},
		{`{"identity":"a"}`, 400, "policy: required"},
		{`{"policy":"orders","cost":-1}`, 400, "cost"},
		{`{"policy":"orders"} {"policy":"orders"}`, 400, "after the JSON object"},
		{`{"policy":"orders","identity":"` + strings.Repeat("x", 70000) + `"}`, 413, "larger than"},
		{"\xff\xfe", 400, "not a check request"},
	} {
		code, _, _, body := scCheck(t, h, tc.body)
		if code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("%.40q: %d %s; want %d containing %q", tc.body, code, body, tc.code, tc.msg)
		}
	}
	// A non-UTF-8 identity is just bytes: counted, never an error.
	if code, resp, _, _ := scCheck(t, h, `{"policy":"orders","identity":"\udc80{evil}\n"}`); code != 200 || !resp.Allowed {
		t.Errorf("odd identity: %d %+v", code, resp)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpcheck.Path, nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" {
		t.Errorf("GET: %d %v", rec.Code, rec.Header())
	}
	empty := &httpcheck.Handler{Engine: &engine.Engine{Store: &engine.Store{}}}
	if code, _, _, body := scCheck(t, empty, `{"policy":"orders"}`); code != 503 || !strings.Contains(body, "no policy snapshot") {
		t.Errorf("before any snapshot: %d %s", code, body)
	}
}

// An Idempotency-Key must not be a free pass: one request id sent for 12 different requests
// (fingerprints) was admitted 12 times with 3 per minute.
func TestCheckAPIIdempotencyBindsToFingerprint(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.IdempotentPolicy("pay", 3))
	srv := httptest.NewServer(&httpcheck.Handler{Engine: rig.Engine})
	t.Cleanup(srv.Close)
	allowed := 0
	for i := range 12 {
		body, _ := json.Marshal(checkwire.Request{Policy: "pay", Identity: "alice", RequestID: "same",
			Fingerprint: fmt.Sprintf("POST /path-%d", i)})
		resp, err := http.Post(srv.URL+httpcheck.Path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("one request id with 12 fingerprints: %d allowed, want 3", allowed)
	}
}
