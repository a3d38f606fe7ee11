package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/proxy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// proxyRig is the proxy front of rig in front of a real upstream server that counts the
// requests it gets, echoes X-Forwarded-For and records the last request it received.
type proxyRig struct {
	url   string
	hits  atomic.Int64
	front *httptest.Server
	last  atomic.Pointer[http.Request] // the last request the upstream received
}

func newProxyRig(t *testing.T, rig *sidecartest.Rig) *proxyRig {
	t.Helper()
	p := &proxyRig{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.last.Store(r.Clone(context.Background()))
		w.Header().Set("X-Seen-XFF", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("RateLimit", "upstream's own, must be replaced")
		_, _ = io.WriteString(w, "hello from "+r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	u, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	p.front = httptest.NewServer(proxy.New(rig.Engine, u, logr.Discard()))
	t.Cleanup(p.front.Close)
	p.url = p.front.URL
	return p
}

// get sends a GET of path through the proxy with header pairs.
func (p *proxyRig) get(t *testing.T, path string, header ...string) (*http.Response, string) {
	t.Helper()
	return sidecartest.Send(t, http.MethodGet, p.url+path, header...)
}

func TestProxyBurstThenDeny(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 3))
	p := newProxyRig(t, rig)
	for i := range 3 {
		resp, body := p.get(t, "/api/orders/1", "X-API-Key", "alice")
		if resp.StatusCode != 200 || body != "hello from /api/orders/1" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		checkProxied(t, resp, fmt.Sprintf(`"orders/per-minute";r=%d;t=`, 2-i))
	}
	resp, body := p.get(t, "/api/orders/1", "X-API-Key", "alice")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "20" ||
		resp.Header.Get("RateLimit") != `"orders/per-minute";r=0;t=20` || resp.Header.Get("RateLimit-Policy") != `"orders/per-minute";q=3;w=60` {
		t.Fatalf("4th request: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	if !strings.Contains(body, "policy orders (limit per-minute); retry after 20s") {
		t.Errorf("429 body %q", body)
	}
	if got := p.hits.Load(); got != 3 {
		t.Errorf("upstream got %d requests, want 3", got)
	}
	if resp, _ := p.get(t, "/api/orders/1", "X-API-Key", "bob"); resp.StatusCode != 200 {
		t.Errorf("bob is independent: %d", resp.StatusCode)
	}
	if resp, _ := p.get(t, "/static/logo.png", "X-API-Key", "alice"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "upstream's own, must be replaced" {
		t.Errorf("an unmatched path passes untouched: %d %v", resp.StatusCode, resp.Header)
	}
}

// checkProxied asserts an admitted answer: our RateLimit header replaced the upstream's, and
// the upstream saw the client in X-Forwarded-For.
func checkProxied(t *testing.T, resp *http.Response, rateLimitPrefix string) {
	t.Helper()
	if got := resp.Header.Values("RateLimit"); len(got) != 1 || !strings.HasPrefix(got[0], rateLimitPrefix) {
		t.Fatalf("RateLimit = %q, want one value starting %s", got, rateLimitPrefix)
	}
	if resp.Header.Get("X-Seen-XFF") != "127.0.0.1" {
		t.Errorf("upstream saw X-Forwarded-For %q", resp.Header.Get("X-Seen-XFF"))
	}
}

func TestProxyPolicies(t *testing.T) {
	costly := func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP[0].PathPrefixes = []string{"/api"}
		s.Cost = &v1alpha1.Cost{Default: 1, Header: "X-Cost", Max: new(int64(5))}
	}
	rig := sidecartest.Start(t, limiter.Options{},
		sidecartest.Policy("a-strict", 1, func(s *v1alpha1.RateLimitPolicySpec) { s.Match.HTTP[0].PathPrefixes = []string{"/api"} }),
		sidecartest.Policy("b-costly", 10, costly),
		sidecartest.Policy("login", 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.OnMissing = v1alpha1.MissingIdentityReject
		}),
		sidecartest.Policy("shadow", 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Shadow = true
			s.Match.HTTP[0].PathPrefixes = []string{"/shadow"}
		}),
	)
	p := newProxyRig(t, rig)
	if resp, _ := p.get(t, "/api/x", "X-API-Key", "k", "X-Cost", "3"); resp.StatusCode != 200 ||
		!strings.Contains(resp.Header.Get("RateLimit"), `"b-costly/per-minute";r=7`) {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	// a-strict denies first, so b-costly is not debited for a denied request.
	if resp, _ := p.get(t, "/api/x", "X-API-Key", "k", "X-Cost", "3"); resp.StatusCode != 429 {
		t.Fatalf("second: %d", resp.StatusCode)
	}
	if got := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_total", map[string]string{"policy": "b-costly"}); got != 1 {
		t.Errorf("b-costly checked %v times, want 1 (not after a-strict denied)", got)
	}
	for _, bad := range []string{"0", "six", "6", "-1"} {
		if resp, body := p.get(t, "/api/x", "X-API-Key", "k2", "X-Cost", bad); resp.StatusCode != 400 || !strings.Contains(body, "X-Cost") {
			t.Errorf("X-Cost %q: %d %s", bad, resp.StatusCode, body)
		}
	}
	if resp, body := p.get(t, "/api/login"); resp.StatusCode != 429 || !strings.Contains(body, "requires an identity") || resp.Header.Get("Retry-After") != "" {
		t.Errorf("login without identity: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	for i := range 3 {
		if resp, _ := p.get(t, "/shadow", "X-API-Key", "k"); resp.StatusCode != 200 {
			t.Errorf("shadow %d: %d", i, resp.StatusCode)
		}
	}
	if got := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_total", map[string]string{"policy": "shadow", "result": "shadow_denied"}); got != 2 {
		t.Errorf("shadow_denied = %v, want 2", got)
	}
}

// raw sends one request exactly as written, request target and all, on its own connection:
// Go's client would clean or re-encode the odd targets these tests need.
func (p *proxyRig) raw(t *testing.T, method, target string, header ...string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", p.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n", method, target)
	for i := 0; i < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// lastSeen is the request target and method the upstream last received, or "" before any.
func (p *proxyRig) lastSeen() (target, method string) {
	if r := p.last.Load(); r != nil {
		return r.RequestURI, r.Method
	}
	return "", ""
}

// TestProxyAppendsXForwardedFor: the peer address is appended to the inbound X-Forwarded-For
// (every field line, in order), as nginx's $proxy_add_x_forwarded_for does.
func TestProxyAppendsXForwardedFor(t *testing.T) {
	p := newProxyRig(t, sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 10)))
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
	rig := sidecartest.Start(t, limiter.Options{},
		sidecartest.Policy("orders", 10, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Cost = &v1alpha1.Cost{Default: 1, Header: "X-Cost", Max: new(int64(5))}
			s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: 10 * time.Minute}}
		}),
		sidecartest.Policy("tokens", 10, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.Sources = []v1alpha1.IdentitySource{claim}
		}),
	)
	p := newProxyRig(t, rig)
	tok := strings.TrimPrefix(sidecartest.JWT(`{"sub":"a"}`), "Bearer ")
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
	if got := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_total", nil); got != 0 {
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
	p := newProxyRig(t, sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 2, func(s *v1alpha1.RateLimitPolicySpec) {
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
