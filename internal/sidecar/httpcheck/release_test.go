package httpcheck_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// scRelease posts body to the release handler.
func scRelease(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, httpcheck.ReleasePath, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// TestCheckAPIRelease: 2 in flight per caller. Two checks are admitted with a slot each, a
// third is 429 naming the in-flight limit, and a peek shows both slots held; releasing a
// slot lets the next in, releasing it again says it was not held.
func TestCheckAPIRelease(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("llm", 100, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Concurrency = &v1alpha1.Concurrency{Max: 2, SlotTTL: &metav1.Duration{Duration: time.Minute}}
	}), sidecartest.Policy("plain", 5))
	check, release := &httpcheck.Handler{Engine: rig.Engine}, &httpcheck.ReleaseHandler{Engine: rig.Engine}
	var slots []string
	for i := range 2 {
		code, resp, _, _ := scCheck(t, check, `{"policy":"llm","identity":"alice"}`)
		if code != http.StatusOK || resp.Slot == "" {
			t.Fatalf("check %d of 2 in flight: %d %+v", i+1, code, resp)
		}
		slots = append(slots, resp.Slot)
	}
	code, resp, _, _ := scCheck(t, check, `{"policy":"llm","identity":"alice"}`)
	if code != http.StatusTooManyRequests || resp.Limit != limiter.ConcurrencyLimitName || resp.Slot != "" {
		t.Fatalf("a 3rd in flight: %d %+v, want 429 by %s", code, resp, limiter.ConcurrencyLimitName)
	}
	if _, peek, _, _ := scCheck(t, check, `{"policy":"llm","identity":"alice","peek":true}`); len(peek.Limits) != 2 ||
		peek.Limits[1].Name != limiter.ConcurrencyLimitName || peek.Limits[1].Used != 2 || peek.Limits[1].Remaining != 0 {
		t.Fatalf("a peek with both slots held: %+v, want in-flight 2 used, 0 left", peek)
	}
	body := `{"policy":"llm","identity":"alice","slot":"` + slots[0] + `"}`
	wantReleased(t, release, body, true)
	wantReleased(t, release, body, false)
	if code, resp, _, _ := scCheck(t, check, `{"policy":"llm","identity":"alice"}`); code != http.StatusOK {
		t.Fatalf("after a release: %d %+v", code, resp)
	}
}

// wantReleased posts the release body and requires 200 saying whether the slot was held.
func wantReleased(t *testing.T, h http.Handler, body string, held bool) {
	t.Helper()
	want := `"released":false`
	if held {
		want = `"released":true`
	}
	if code, raw := scRelease(t, h, body); code != http.StatusOK || !strings.Contains(raw, want) {
		t.Fatalf("release %s: %d %s, want %s", body, code, raw, want)
	}
}

// TestCheckAPIReleaseRefusesBadBodies: a policy without a concurrency limit, a missing or
// misshapen slot and an unknown field are 400 naming the field.
func TestCheckAPIReleaseRefusesBadBodies(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("llm", 100, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Concurrency = &v1alpha1.Concurrency{Max: 2, SlotTTL: &metav1.Duration{Duration: time.Minute}}
	}), sidecartest.Policy("plain", 5))
	release := &httpcheck.ReleaseHandler{Engine: rig.Engine}
	for _, bad := range []struct{ body, field string }{
		{`{"policy":"plain","identity":"alice","slot":"` + strings.Repeat("s", 32) + `"}`, "policy"},
		{`{"policy":"llm","identity":"alice"}`, "slot"},
		{`{"policy":"llm","identity":"alice","slot":"` + strings.Repeat("s", 33) + `"}`, "slot"},
		{`{"policy":"llm","identity":"alice","slot":"` + strings.Repeat("s", 32) + `","extra":1}`, "extra"},
	} {
		if code, raw := scRelease(t, release, bad.body); code != http.StatusBadRequest || !strings.Contains(raw, bad.field) {
			t.Errorf("%s: %d %s, want 400 naming %s", bad.body, code, raw, bad.field)
		}
	}
}
