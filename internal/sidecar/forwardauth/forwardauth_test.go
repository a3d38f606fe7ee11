package forwardauth_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/forwardauth"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// protocol is one of the two paths with how a proxy describes a request to it and the
// status of its denial.
type protocol struct {
	name     string
	path     string
	describe func(uri string, extra ...string) []string
	deny     int
}

var protocols = []protocol{
	{"forward-auth", forwardauth.ForwardAuthPath, caddy, http.StatusTooManyRequests},
	{"auth-request", forwardauth.AuthRequestPath, nginx, http.StatusForbidden},
}

// A burst of 3 is admitted with empty 200s carrying RateLimit and RateLimit-Policy; the
// fourth is denied (429, or 403 for nginx) with Retry-After, the RateLimit headers and the
// reason. Whatever method the auth request itself uses.
func TestBurstThenDeny(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 3))
			burstThenDeny(t, p, front(t, rig.Engine, loopback)+p.path)
		})
	}
}

func burstThenDeny(t *testing.T, p protocol, url string) {
	t.Helper()
	for i, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		resp, body := sidecartest.Send(t, method, url, p.describe("/api/orders/1?page=2", "X-API-Key", "alice")...)
		if resp.StatusCode != http.StatusOK || body != "" {
			t.Fatalf("request %d (%s): %d %q", i, method, resp.StatusCode, body)
		}
		if !strings.Contains(resp.Header.Get("RateLimit-Policy"), `"orders/per-minute";q=3;w=60`) ||
			!strings.Contains(resp.Header.Get("RateLimit"), fmt.Sprintf(`"orders/per-minute";r=%d;`, 2-i)) {
			t.Errorf("request %d headers: %v", i, resp.Header)
		}
	}
	resp, body := sidecartest.Send(t, http.MethodGet, url, p.describe("/api/orders/1", "X-API-Key", "alice")...)
	if resp.StatusCode != p.deny {
		t.Fatalf("fourth: %d %q, want %d", resp.StatusCode, body, p.deny)
	}
	if resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") == "" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.Contains(body, "rate limited by policy orders") {
		t.Errorf("denial: %v %q", resp.Header, body)
	}
	if resp, _ := sidecartest.Send(t, http.MethodGet, url, p.describe("/api/orders/1", "X-API-Key", "bob")...); resp.StatusCode != http.StatusOK {
		t.Errorf("another caller: %d", resp.StatusCode)
	}
	if resp, _ := sidecartest.Send(t, http.MethodGet, url, p.describe("/elsewhere", "X-API-Key", "alice")...); resp.StatusCode != http.StatusOK ||
		resp.Header.Get("RateLimit") != "" {
		t.Errorf("a path no policy matches: %d %v", resp.StatusCode, resp.Header)
	}
}

// Paths are matched normalized, as the reverse proxy matches them: "//api/orders" and
// "/API/orders" spend the same limit; an encoded "/" is refused 400 and debits nothing.
func TestPathsNormalized(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 3))
			url := front(t, rig.Engine, loopback) + p.path
			for _, uri := range []string{"/api/orders/%2F..", "/api%2Forders"} {
				if resp, body := sidecartest.Send(t, http.MethodGet, url, p.describe(uri, "X-API-Key", "alice")...); resp.StatusCode != http.StatusBadRequest ||
					!strings.Contains(body, "path") {
					t.Errorf("%s: %d %q, want 400 naming the path", uri, resp.StatusCode, body)
				}
			}
			for _, uri := range []string{"//api/orders", "/API/orders", "/api/./orders"} {
				if resp, _ := sidecartest.Send(t, http.MethodGet, url, p.describe(uri, "X-API-Key", "alice")...); resp.StatusCode != http.StatusOK {
					t.Errorf("%s: %d", uri, resp.StatusCode)
				}
			}
			if resp, _ := sidecartest.Send(t, http.MethodGet, url, p.describe("/api/orders", "X-API-Key", "alice")...); resp.StatusCode != p.deny {
				t.Errorf("fourth spelling of the same path: %d, want %d (one limit)", resp.StatusCode, p.deny)
			}
		})
	}
}

// A peer outside the trusted CIDRs is answered 421 before anything is read: a client that
// reaches the endpoint directly cannot state the request it is judged by, nor spend anyone's
// quota.
func TestUntrustedPeerRefused(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 3))
	direct := front(t, rig.Engine, nil) // trusts nobody: the test's loopback client is "a client"
	elsewhere := front(t, rig.Engine, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for _, p := range protocols {
		for _, url := range []string{direct + p.path, elsewhere + p.path, elsewhere + "/other"} {
			for range 5 {
				resp, body := sidecartest.Send(t, http.MethodGet, url, p.describe("/api/orders", "X-API-Key", "alice")...)
				if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("RateLimit") != "" || !strings.Contains(body, "trusted") {
					t.Fatalf("%s from an untrusted peer: %d %v %q, want 421", url, resp.StatusCode, resp.Header, body)
				}
			}
		}
	}
	trusted := front(t, rig.Engine, loopback) + forwardauth.ForwardAuthPath
	for i := range 3 {
		if resp, _ := sidecartest.Send(t, http.MethodGet, trusted, caddy("/api/orders", "X-API-Key", "alice")...); resp.StatusCode != http.StatusOK {
			t.Fatalf("trusted request %d after the refused ones: %d: something was debited", i, resp.StatusCode)
		}
	}
}

// A header naming the original request that is missing, empty or repeated is answered 400
// naming it, as is a repeated identity header; nothing is debited.
func TestBadAuthRequests(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	base := front(t, rig.Engine, loopback)
	fa, ar := base+forwardauth.ForwardAuthPath, base+forwardauth.AuthRequestPath
	without := func(h []string, name string) []string {
		var out []string
		for i := 0; i < len(h); i += 2 {
			if h[i] != name {
				out = append(out, h[i], h[i+1])
			}
		}
		return out
	}
	key := []string{"X-API-Key", "alice"}
	cases := []struct {
		url    string
		header []string
		want   string
	}{
		{fa, without(caddy("/api/orders", key...), "X-Forwarded-Method"), "X-Forwarded-Method: required"},
		{fa, without(caddy("/api/orders", key...), "X-Forwarded-Uri"), "X-Forwarded-Uri: required"},
		{fa, without(caddy("/api/orders", key...), "X-Forwarded-Host"), "X-Forwarded-Host: required"},
		{fa, without(caddy("/api/orders", key...), "X-Forwarded-For"), "X-Forwarded-For: required"},
		{fa, caddy("/api/orders", "X-API-Key", "alice", "X-Forwarded-Method", "POST"), "X-Forwarded-Method"},
		{fa, caddy("/api/orders", "X-API-Key", "alice", "X-API-Key", "bob"), "X-Api-Key"},
		{fa, append(without(caddy("/api/orders", key...), "X-Forwarded-For"), "X-Forwarded-For", "1.2.3.4, unknown"), "not an address"},
		{ar, without(nginx("/api/orders", key...), "X-Original-Method"), "X-Original-Method: required"},
		{ar, without(nginx("/api/orders", key...), "X-Original-URL"), "X-Original-URL: required"},
		{ar, without(nginx("/api/orders", key...), "X-Forwarded-For"), "X-Forwarded-For: required"},
		{ar, append(without(nginx("/api/orders", key...), "X-Original-URL"), "X-Original-URL", "/api/orders"), "X-Original-URL"},
		{ar, append(without(nginx("/api/orders", key...), "X-Original-URL"), "X-Original-URL", "http:///api/orders"), "no host"},
		{ar, nginx("/api/orders", "X-API-Key", "alice", "X-API-Key", "bob"), "X-Api-Key"},
	}
	for _, c := range cases {
		resp, body := sidecartest.Send(t, http.MethodGet, c.url, c.header...)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(strings.ToLower(body), strings.ToLower(c.want)) {
			t.Errorf("%v: %d %q, want 400 naming %q", c.header, resp.StatusCode, body, c.want)
		}
	}
	if resp, _ := sidecartest.Send(t, http.MethodGet, fa, caddy("/api/orders", key...)...); resp.StatusCode != http.StatusOK {
		t.Errorf("after the refused requests: %d: something was debited", resp.StatusCode)
	}
}

// The original request's query goes with its path ("/?x" when X-Original-URL has no path).
func TestAuthRequestURLForms(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 1, onPaths))
	url := front(t, rig.Engine, loopback) + forwardauth.AuthRequestPath
	for i, u := range []string{"HTTPS://shop.example:8443?x=1", "http://shop.example"} {
		resp, body := sidecartest.Send(t, http.MethodGet, url, "X-Original-URL", u, "X-Original-Method", "GET", "X-Forwarded-For", "203.0.113.7",
			"X-API-Key", "k")
		if want := []int{200, 403}[i]; resp.StatusCode != want {
			t.Errorf("%s: %d %q, want %d", u, resp.StatusCode, body, want)
		}
	}
}

// Before the first snapshot nothing can be decided: 503.
func TestNoSnapshot(t *testing.T) {
	e := &engine.Engine{Store: &engine.Store{Namespace: sidecartest.Namespace}}
	base := front(t, e, loopback)
	for _, p := range protocols {
		if resp, _ := sidecartest.Send(t, http.MethodGet, base+p.path, p.describe("/api/orders")...); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: %d, want 503", p.name, resp.StatusCode)
		}
	}
}

// With Redis killed each policy's failure mode decides: FailOpen admits, FailClosed denies
// (429, or 403 for nginx).
func TestRedisDownFailureModes(t *testing.T) {
	mode := func(m v1alpha1.FailureMode) func(*v1alpha1.RateLimitPolicySpec) {
		return func(s *v1alpha1.RateLimitPolicySpec) { s.FailureMode = m }
	}
	rig := sidecartest.Start(t, limiter.Options{Timeout: 50 * time.Millisecond},
		sidecartest.Policy("open", 1000, mode(v1alpha1.FailureModeFailOpen)),
		sidecartest.Policy("closed", 1000, mode(v1alpha1.FailureModeFailClosed)))
	base := front(t, rig.Engine, loopback)
	rig.Redis.Kill()
	for _, p := range protocols {
		if resp, _ := sidecartest.Send(t, http.MethodGet, base+p.path, p.describe("/api/open", "X-API-Key", "a")...); resp.StatusCode != http.StatusOK {
			t.Errorf("%s FailOpen: %d", p.name, resp.StatusCode)
		}
		resp, body := sidecartest.Send(t, http.MethodGet, base+p.path, p.describe("/api/closed", "X-API-Key", "a")...)
		if resp.StatusCode != p.deny || !strings.Contains(body, "Redis is unavailable") {
			t.Errorf("%s FailClosed: %d %q, want %d", p.name, resp.StatusCode, body, p.deny)
		}
	}
}

// onPaths matches every path.
func onPaths(s *v1alpha1.RateLimitPolicySpec) {
	s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/"}}}
}

// The host an auth request's own query states (ingress-nginx's auth-url "?host=$host", the
// host nginx routed on) is the host judged, whatever X-Original-URL's host (the client's Host
// header) says; an empty or repeated one, or a host that is not a host name, is refused 400.
func TestRoutedHostIsJudged(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("shop", 1, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{"shop.example"}}}
	}))
	url := front(t, rig.Engine, loopback) + forwardauth.AuthRequestPath
	forged := []string{"X-Original-URL", "http://elsewhere.example/api", "X-Original-Method", "GET", "X-Forwarded-For", "203.0.113.7", "X-API-Key", "k"}
	for i, want := range []int{http.StatusOK, http.StatusForbidden} {
		if resp, body := sidecartest.Send(t, http.MethodGet, url+"?host=shop.example", forged...); resp.StatusCode != want {
			t.Errorf("request %d routed to shop.example with Host elsewhere.example: %d %q, want %d", i, resp.StatusCode, body, want)
		}
	}
	for _, q := range []string{"?host=", "?host=shop.example&host=elsewhere.example", "?host=shop.example..", "?host=shop%2eexample"} {
		if resp, body := sidecartest.Send(t, http.MethodGet, url+q, forged...); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "host") {
			t.Errorf("%s: %d %q, want 400 naming the host", q, resp.StatusCode, body)
		}
	}
}
