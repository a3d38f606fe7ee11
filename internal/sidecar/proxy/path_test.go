package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// loginPolicy allows one request per minute per X-API-Key on /login.
func loginPolicy(edits ...func(*v1alpha1.RateLimitPolicySpec)) *v1alpha1.RateLimitPolicy {
	return sidecartest.Policy("login", 1, append([]func(*v1alpha1.RateLimitPolicySpec){func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP[0].PathPrefixes = []string{"/login"}
	}}, edits...)...)
}

// TestProxyPathVariantsAreJudged: every spelling of /login that an nginx- or Spring-style
// upstream serves as /login is judged by the /login policy, and the upstream receives the
// normalized path (which is what was matched), query unchanged.
func TestProxyPathVariantsAreJudged(t *testing.T) {
	p := newProxyRig(t, sidecartest.Start(t, limiter.Options{}, loginPolicy()))
	for _, tc := range []struct{ target, forwarded string }{
		{"/login", "/login"},
		{"/./login", "/login"},
		{"//login", "/login"},
		{"/x/../login", "/login"},
		{"/%6Cogin", "/login"},
		{"/%2e%2e/login", "/login"},
		{"/LOGIN", "/LOGIN"},
		{"/login;x=1", "/login;x=1"},
		{"/x/..;/login", "/x/..;/login"}, // Tomcat strips ";" before resolving "..": /login
		{"/login/", "/login/"},
		{"/login/./x?a=%2F&b", "/login/x?a=%2F&b"},
		{"/login%7e", "/login~"}, // %7e is "~", unreserved: another segment than /login
	} {
		key := "k" + tc.target // one budget per spelling
		resp, body := p.raw(t, http.MethodGet, tc.target, "X-API-Key", key)
		got, _ := p.lastSeen()
		judged := strings.HasPrefix(resp.Header.Get("RateLimit"), `"login/per-minute";r=0`)
		if tc.target == "/login%7e" {
			if resp.StatusCode != 200 || judged || got != tc.forwarded {
				t.Errorf("%s is another path: %d RateLimit=%q, upstream got %q, want %q", tc.target, resp.StatusCode,
					resp.Header.Get("RateLimit"), got, tc.forwarded)
			}
			continue
		}
		if resp.StatusCode != 200 || !judged || got != tc.forwarded {
			t.Errorf("%s: %d RateLimit=%q %q; upstream got %q, want %q judged by policy login", tc.target, resp.StatusCode,
				resp.Header.Get("RateLimit"), body, got, tc.forwarded)
			continue
		}
		if resp, _ := p.raw(t, http.MethodGet, tc.target, "X-API-Key", key); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s a second time: %d, want 429", tc.target, resp.StatusCode)
		}
	}
}

// TestProxyRefusesAmbiguousPaths: paths upstreams disagree on get 400, reach no upstream and
// debit nothing.
func TestProxyRefusesAmbiguousPaths(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, loginPolicy())
	p := newProxyRig(t, rig)
	for _, tc := range []struct{ target, why string }{
		{"/%2Flogin", "encoded slash"},
		{"/login%2F..", "encoded slash"},
		{"/login%2f..%2f", "encoded slash"},
		{`\login`, ""}, // Go's server refuses it before any handler
		{`/\login`, "backslash"},
		{"/%5Clogin", "backslash"},
		{"/login%00", "control"},
		{"/login%0A", "control"},
		{"/login%7F", "control"},
		{"/log%zzin", ""}, // Go's server refuses it before any handler
		{"/login%2", ""},
		{"/login%2F%7B", "encoded slash"}, // with a byte Go re-encodes: RawPath alone would lose the %2F
		{"*", "asterisk"},
	} {
		resp, body := p.raw(t, http.MethodGet, tc.target, "X-API-Key", "refused")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.why) {
			t.Errorf("%s: %d %q, want 400 naming %q", tc.target, resp.StatusCode, body, tc.why)
		}
	}
	if got := p.hits.Load(); got != 0 {
		t.Errorf("the upstream got %d refused requests", got)
	}
	if got := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_total", nil); got != 0 {
		t.Errorf("%v decisions for refused requests, want none", got)
	}
	resp, _ := p.raw(t, http.MethodGet, "/login", "X-API-Key", "refused")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"login/per-minute";r=0`) {
		t.Errorf("the refused requests' identity must have its whole budget: %d %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
}

// TestProxyMethodsMatchCaseInsensitively: an upstream that reads methods case-insensitively
// serves "post" as POST, so a POST policy judges it; the method is forwarded unchanged. HEAD
// runs GET's handler on most servers, so a GET policy judges HEAD too.
func TestProxyMethodsMatchCaseInsensitively(t *testing.T) {
	p := newProxyRig(t, sidecartest.Start(t, limiter.Options{},
		loginPolicy(func(s *v1alpha1.RateLimitPolicySpec) { s.Match.HTTP[0].Methods = []v1alpha1.HTTPMethod{"POST"} }),
		sidecartest.Policy("report", 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP[0].PathPrefixes = []string{"/report"}
			s.Match.HTTP[0].Methods = []v1alpha1.HTTPMethod{"GET"}
		}),
	))
	for _, tc := range []struct{ method, target, policy string }{
		{"post", "/login", "login"},
		{"Post", "/login", "login"},
		{"HEAD", "/report", "report"},
	} {
		key := tc.method + tc.target
		resp, _ := p.raw(t, tc.method, tc.target, "X-API-Key", key, "Content-Length", "0")
		_, method := p.lastSeen()
		if !strings.HasPrefix(resp.Header.Get("RateLimit"), `"`+tc.policy+`/per-minute";r=0`) || method != tc.method {
			t.Errorf("%s %s: %d RateLimit=%q, upstream method %q: want judged by %s and forwarded as %s", tc.method, tc.target,
				resp.StatusCode, resp.Header.Get("RateLimit"), method, tc.policy, tc.method)
		}
		if resp, _ := p.raw(t, tc.method, tc.target, "X-API-Key", key, "Content-Length", "0"); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s %s a second time: %d, want 429", tc.method, tc.target, resp.StatusCode)
		}
	}
	if resp, _ := p.raw(t, "GET", "/login", "X-API-Key", "g"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "upstream's own, must be replaced" {
		t.Errorf("GET is not POST: %d %v", resp.StatusCode, resp.Header)
	}
}
