package forwardauth_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/forwardauth"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// byClientIP is a policy of 1 per minute per client address, trusting n proxies in front.
func byClientIP(name string, n int32) *v1alpha1.RateLimitPolicy {
	return sidecartest.Policy(name, 1, onPaths, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityClientIP,
			ClientIP: &v1alpha1.ClientIPSource{TrustedProxies: n}}}
	})
}

// The asking proxy's own X-Forwarded-For entry is the engine's peer: with trustedProxies 0
// the client address is that entry whatever the client wrote to its left; with 1 it is the
// entry the proxy in front of the asking proxy appended.
func TestXForwardedForMapsToPeer(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for _, c := range []struct {
				trusted int32
				want    []int // for "a, P", "b, P", "a, P", "a, Q"
			}{
				{0, []int{200, p.deny, p.deny, 200}},
				{1, []int{200, 200, p.deny, p.deny}},
			} {
				rig := sidecartest.Start(t, limiter.Options{}, byClientIP("by-ip", c.trusted))
				url := front(t, rig.Engine, loopback) + p.path
				var got []int
				for _, xff := range []string{"198.51.100.1, 203.0.113.7", "198.51.100.2, 203.0.113.7", "198.51.100.1, 203.0.113.7",
					"198.51.100.1, 203.0.113.8"} {
					resp, _ := sidecartest.Send(t, http.MethodGet, url, append(dropFirst(p.describe("/x"), "X-Forwarded-For"), "X-Forwarded-For", xff)...)
					got = append(got, resp.StatusCode)
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("trustedProxies %d: %v, want %v", c.trusted, got, c.want)
				}
			}
		})
	}
}

// The headers the proxy wrote to describe the request are not the request's: a policy that
// reads one as an identity finds none (and rejects), while the request's own headers count.
func TestProxyHeadersAreNotTheRequests(t *testing.T) {
	reject := func(header string) *v1alpha1.RateLimitPolicy {
		return sidecartest.Policy("by-"+header[2:], 100, onPaths, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: header}}}
			s.Identity.OnMissing = v1alpha1.MissingIdentityReject
		})
	}
	for _, header := range []string{"X-Forwarded-Host", "X-Forwarded-Uri", "X-Original-URL", "X-Original-Method", "X-Forwarded-Proto"} {
		rig := sidecartest.Start(t, limiter.Options{}, reject(header))
		base := front(t, rig.Engine, loopback)
		for _, p := range protocols {
			if resp, body := sidecartest.Send(t, http.MethodGet, base+p.path, p.describe("/x")...); resp.StatusCode != p.deny {
				t.Errorf("%s, identity from %s: %d %q, want %d (no identity)", p.name, header, resp.StatusCode, body, p.deny)
			}
		}
	}
	rig := sidecartest.Start(t, limiter.Options{}, reject("X-Tenant"))
	url := front(t, rig.Engine, loopback) + forwardauth.ForwardAuthPath
	if resp, _ := sidecartest.Send(t, http.MethodGet, url, caddy("/x", "X-Tenant", "t1")...); resp.StatusCode != http.StatusOK {
		t.Errorf("identity from the request's own header: %d", resp.StatusCode)
	}
	if resp, _ := sidecartest.Send(t, http.MethodGet, url, caddy("/x", "X-Tenant", "t1", "Connection", "X-Tenant")...); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("identity from a header Connection names (hop-by-hop): %d, want 429 (no identity)", resp.StatusCode)
	}
}

// An Idempotency-Key replays a decision only for the same forwarded method, host and URI:
// one key sent for 12 different original requests spends the limit like 12 requests.
func TestIdempotencyFingerprintIsTheOriginalRequest(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			rig := sidecartest.Start(t, limiter.Options{}, sidecartest.IdempotentPolicy("pay", 3))
			url := front(t, rig.Engine, loopback) + p.path
			admitted := 0
			for i := range 12 {
				if resp, _ := sidecartest.Send(t, http.MethodGet, url, p.describe(fmt.Sprintf("/pay/%d", i), "X-API-Key", "alice", "Idempotency-Key", "k")...); resp.StatusCode == http.StatusOK {
					admitted++
				}
			}
			if admitted != 3 {
				t.Errorf("one key on 12 URIs: %d admitted, want 3", admitted)
			}
			rig = sidecartest.Start(t, limiter.Options{}, sidecartest.IdempotentPolicy("pay", 1))
			url = front(t, rig.Engine, loopback) + p.path
			first, _ := sidecartest.Send(t, http.MethodGet, url, p.describe("/pay", "X-API-Key", "bob", "Idempotency-Key", "k")...)
			replay, _ := sidecartest.Send(t, http.MethodGet, url, p.describe("/pay", "X-API-Key", "bob", "Idempotency-Key", "k")...)
			other := append(p.describe("/pay", "X-API-Key", "bob", "Idempotency-Key", "k"), "X-Forwarded-Method", "DELETE", "X-Original-Method", "DELETE")
			other = dropFirst(dropFirst(other, "X-Forwarded-Method"), "X-Original-Method")
			method, _ := sidecartest.Send(t, http.MethodGet, url, other...)
			host := replaceHost(p.describe("/pay", "X-API-Key", "bob", "Idempotency-Key", "k"))
			onHost, _ := sidecartest.Send(t, http.MethodGet, url, host...)
			if first.StatusCode != 200 || replay.StatusCode != 200 || method.StatusCode != p.deny || onHost.StatusCode != p.deny {
				t.Errorf("first %d, replay %d, other method %d, other host %d; want 200 200 %d %d",
					first.StatusCode, replay.StatusCode, method.StatusCode, onHost.StatusCode, p.deny, p.deny)
			}
		})
	}
}

// dropFirst removes the first pair named name from header pairs.
func dropFirst(h []string, name string) []string {
	for i := 0; i < len(h); i += 2 {
		if h[i] == name {
			return append(h[:i:i], h[i+2:]...)
		}
	}
	return h
}

// replaceHost states the same request on host "other.example".
func replaceHost(h []string) []string {
	for i := 0; i < len(h); i += 2 {
		switch h[i] {
		case "X-Forwarded-Host":
			h[i+1] = "other.example"
		case "X-Original-URL":
			h[i+1] = "http://other.example/pay"
		}
	}
	return h
}
