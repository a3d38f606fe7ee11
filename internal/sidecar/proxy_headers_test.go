package sidecar_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// TestProxyAppendsXForwardedFor: the peer address is appended to the inbound X-Forwarded-For
// (every field line, in order), as nginx's $proxy_add_x_forwarded_for does.
func TestProxyAppendsXForwardedFor(t *testing.T) {
	p := newSCProxy(t, scStart(t, limiter.Options{}, scPolicy("orders", 10)))
	for _, tc := range []struct {
		header []string
		want   string
	}{
		{nil, "127.0.0.1"},
		{[]string{"X-Forwarded-For", "6.6.6.6"}, "6.6.6.6, 127.0.0.1"},
		{[]string{"X-Forwarded-For", "6.6.6.6, 7.7.7.7", "X-Forwarded-For", "8.8.8.8"}, "6.6.6.6, 7.7.7.7, 8.8.8.8, 127.0.0.1"},
	} {
		resp, _ := p.raw(t, http.MethodGet, "/api/orders", append([]string{"X-API-Key", "k"}, tc.header...)...)
		if got := resp.Header.Get("X-Seen-XFF"); resp.StatusCode != 200 || got != tc.want {
			t.Errorf("inbound %q: %d, upstream saw X-Forwarded-For %q, want %q", tc.header, resp.StatusCode, got, tc.want)
		}
	}
}

// TestProxyRefusesRepeatedHeaders: a header the limiter reads sent on several field lines is
// ambiguous (the limiter would read one value and the upstream may read another), so the
// request is refused with 400 naming the header, and nothing is debited or forwarded.
func TestProxyRefusesRepeatedHeaders(t *testing.T) {
	claim := v1alpha1.IdentitySource{Type: v1alpha1.IdentityJWTClaim, JWTClaim: &v1alpha1.JWTClaimSource{Header: "Authorization", Claim: "sub"}}
	rig := scStart(t, limiter.Options{},
		scPolicy("orders", 10, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Cost = &v1alpha1.Cost{Default: 1, Header: "X-Cost", Max: ptr(int64(5))}
			s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: 10 * time.Minute}}
		}),
		scPolicy("tokens", 10, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.Sources = []v1alpha1.IdentitySource{claim}
		}),
	)
	p := newSCProxy(t, rig)
	tok := strings.TrimPrefix(jwt(`{"sub":"a"}`), "Bearer ")
	for _, tc := range []struct {
		path   string
		header []string
		name   string
	}{
		{"/api/orders", []string{"X-API-Key", "a", "X-API-Key", "b"}, "X-API-Key"},
		{"/api/orders", []string{"X-API-Key", "a", "x-api-key", "a"}, "X-API-Key"},
		{"/api/orders", []string{"X-API-Key", "a", "X-Cost", "1", "X-Cost", "5"}, "X-Cost"},
		{"/api/orders", []string{"X-API-Key", "a", "Idempotency-Key", "r1", "Idempotency-Key", "r2"}, "Idempotency-Key"},
		{"/api/tokens", []string{"Authorization", "Bearer " + tok, "Authorization", "Bearer " + tok}, "Authorization"},
	} {
		resp, body := p.raw(t, http.MethodGet, tc.path, tc.header...)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "header "+tc.name) {
			t.Errorf("%q: %d %q, want 400 naming header %s", tc.header, resp.StatusCode, body, tc.name)
		}
	}
	if got := p.hits.Load(); got != 0 {
		t.Errorf("the upstream got %d ambiguous requests", got)
	}
	if got := metricValue(t, rig.reg, "ratelimit_sidecar_decisions_total", nil); got != 0 {
		t.Errorf("%v decisions for refused requests, want none", got)
	}
	// One field line holding a list is what the upstream sees too: not ambiguous.
	if resp, body := p.raw(t, http.MethodGet, "/api/orders", "X-API-Key", "a, b"); resp.StatusCode != 200 {
		t.Errorf("one line with a comma: %d %q", resp.StatusCode, body)
	}
	// A header no policy reads may repeat.
	if resp, body := p.raw(t, http.MethodGet, "/api/orders", "X-API-Key", "a", "Accept", "a", "Accept", "b"); resp.StatusCode != 200 {
		t.Errorf("a repeated header no policy reads: %d %q", resp.StatusCode, body)
	}
}

// TestProxyIgnoresHopByHopHeaders: a header the Connection header names is dropped before the
// upstream sees it, so the limiter must not read it either. Otherwise a client reusing one
// Idempotency-Key is answered "replayed, no debit" while the upstream, which never sees the
// key, does the work every time; and an identity header the upstream never sees is a free
// choice of budget.
func TestProxyIgnoresHopByHopHeaders(t *testing.T) {
	p := newSCProxy(t, scStart(t, limiter.Options{}, scPolicy("orders", 2, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: 10 * time.Minute}}
	})))
	for i := range 4 {
		resp, _ := p.raw(t, http.MethodGet, "/api/orders", "X-API-Key", "a", "Idempotency-Key", "same", "Connection", "Idempotency-Key")
		if want := map[bool]int{true: 200, false: 429}[i < 2]; resp.StatusCode != want {
			t.Errorf("request %d with a hop-by-hop Idempotency-Key: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if got := p.hits.Load(); got != 2 {
		t.Errorf("the upstream did the work %d times, want 2", got)
	}
	for i, key := range []string{"b1", "b2", "b3"} {
		resp, _ := p.raw(t, http.MethodGet, "/api/orders", "X-API-Key", key, "Connection", "keep-alive, X-API-Key")
		if want := map[bool]int{true: 200, false: 429}[i < 2]; resp.StatusCode != want {
			t.Errorf("identity %s in a hop-by-hop header (counted as no identity, shared): %d, want %d", key, resp.StatusCode, want)
		}
	}
}
