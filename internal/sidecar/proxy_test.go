package sidecar_test

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

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar"
)

// scProxy is the proxy front of rig in front of a real upstream server that counts the
// requests it gets, echoes X-Forwarded-For and records the last request it received.
type scProxy struct {
	url   string
	hits  atomic.Int64
	front *httptest.Server
	last  atomic.Pointer[http.Request] // the last request the upstream received
}

func newSCProxy(t *testing.T, rig *scRig) *scProxy {
	t.Helper()
	p := &scProxy{}
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
	p.front = httptest.NewServer(sidecar.NewProxy(rig.engine, u, logr.Discard()))
	t.Cleanup(p.front.Close)
	p.url = p.front.URL
	return p
}

func (p *scProxy) get(t *testing.T, path string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestProxyBurstThenDeny(t *testing.T) {
	rig := scStart(t, limiter.Options{}, scPolicy("orders", 3))
	p := newSCProxy(t, rig)
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
		s.Cost = &v1alpha1.Cost{Default: 1, Header: "X-Cost", Max: ptr(int64(5))}
	}
	rig := scStart(t, limiter.Options{},
		scPolicy("a-strict", 1, func(s *v1alpha1.RateLimitPolicySpec) { s.Match.HTTP[0].PathPrefixes = []string{"/api"} }),
		scPolicy("b-costly", 10, costly),
		scPolicy("login", 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.OnMissing = v1alpha1.MissingIdentityReject
		}),
		scPolicy("shadow", 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Shadow = true
			s.Match.HTTP[0].PathPrefixes = []string{"/shadow"}
		}),
	)
	p := newSCProxy(t, rig)
	if resp, _ := p.get(t, "/api/x", "X-API-Key", "k", "X-Cost", "3"); resp.StatusCode != 200 ||
		!strings.Contains(resp.Header.Get("RateLimit"), `"b-costly/per-minute";r=7`) {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	// a-strict denies first, so b-costly is not debited for a denied request.
	if resp, _ := p.get(t, "/api/x", "X-API-Key", "k", "X-Cost", "3"); resp.StatusCode != 429 {
		t.Fatalf("second: %d", resp.StatusCode)
	}
	if got := metricValue(t, rig.reg, "ratelimit_sidecar_decisions_total", map[string]string{"policy": "b-costly"}); got != 1 {
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
	if got := metricValue(t, rig.reg, "ratelimit_sidecar_decisions_total", map[string]string{"policy": "shadow", "result": "shadow_denied"}); got != 2 {
		t.Errorf("shadow_denied = %v, want 2", got)
	}
}

// raw sends one request exactly as written, request target and all, on its own connection:
// Go's client would clean or re-encode the odd targets these tests need.
func (p *scProxy) raw(t *testing.T, method, target string, header ...string) (*http.Response, string) {
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
func (p *scProxy) lastSeen() (target, method string) {
	if r := p.last.Load(); r != nil {
		return r.RequestURI, r.Method
	}
	return "", ""
}
