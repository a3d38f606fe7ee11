package requestread_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestHTTPIdentity: each source yields what it should; with several sources the identity
// carries the source's position ("0=", "1="), so one source's values never share a bucket
// with another's.
func TestHTTPIdentity(t *testing.T) {
	src := func(s ...v1alpha1.IdentitySource) func(*v1alpha1.RateLimitPolicySpec) {
		return func(spec *v1alpha1.RateLimitPolicySpec) { spec.Identity.Sources = s }
	}
	header := v1alpha1.IdentitySource{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}}
	claim := v1alpha1.IdentitySource{Type: v1alpha1.IdentityJWTClaim, JWTClaim: &v1alpha1.JWTClaimSource{Claim: "org.id"}}
	ip := func(c *v1alpha1.ClientIPSource) v1alpha1.IdentitySource {
		return v1alpha1.IdentitySource{Type: v1alpha1.IdentityClientIP, ClientIP: c}
	}
	fixed := v1alpha1.IdentitySource{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "everyone"}}
	set := sidecartest.Set(t,
		sidecartest.Policy("key-then-jwt", 5, src(header, claim)),
		sidecartest.Policy("ip-full", 5, src(ip(&v1alpha1.ClientIPSource{IPv4PrefixLength: 32, IPv6PrefixLength: 128}))),
		sidecartest.Policy("ip-masked", 5, src(ip(&v1alpha1.ClientIPSource{IPv4PrefixLength: 24, IPv6PrefixLength: 64}))),
		sidecartest.Policy("ip-proxied", 5, src(ip(&v1alpha1.ClientIPSource{IPv4PrefixLength: 32, IPv6PrefixLength: 128, TrustedProxies: 2}))),
		sidecartest.Policy("key-or-fixed", 5, src(header, fixed)),
	)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		policy string
		header http.Header
		peer   string
		want   string
		ok     bool
	}{
		{"key-then-jwt", h("x-api-key", "k1", "Authorization", sidecartest.JWT(`{"org":{"id":"o"}}`)), "", "0=k1", true},
		{"key-then-jwt", h("Authorization", sidecartest.JWT(`{"org":{"id":"o-7"}}`)), "", "1=o-7", true},
		{"key-then-jwt", h("Authorization", sidecartest.JWT(`{"org":{"id":12345678901234567890}}`)), "", "1=12345678901234567890", true},
		{"key-then-jwt", h("Authorization", sidecartest.JWT(`{"org":"flat"}`)), "", "", false},
		{"key-then-jwt", h("Authorization", "Bearer not-a-jwt"), "", "", false},
		{"key-then-jwt", h("Authorization", "Basic abc"), "", "", false},
		// The auth scheme is case-insensitive (RFC 9110 section 11.1); spaces before the token are tolerated.
		{"key-then-jwt", h("Authorization", "bearer "+strings.TrimPrefix(sidecartest.JWT(`{"org":{"id":"lower"}}`), "Bearer ")), "", "1=lower", true},
		{"key-then-jwt", h("Authorization", "BEARER   "+strings.TrimPrefix(sidecartest.JWT(`{"org":{"id":"spaced"}}`), "Bearer ")), "", "1=spaced", true},
		{"key-then-jwt", h("Authorization", "Bearer\t"+strings.TrimPrefix(sidecartest.JWT(`{"org":{"id":"tab"}}`), "Bearer ")), "", "1=tab", true},
		{"key-then-jwt", h("Authorization", "Bearerx "+strings.TrimPrefix(sidecartest.JWT(`{"org":{"id":"x"}}`), "Bearer ")), "", "", false},
		{"key-then-jwt", h(), "", "", false},
		{"ip-full", h("X-Forwarded-For", "9.9.9.9"), "10.1.2.3:5555", "10.1.2.3", true},
		{"ip-full", h(), "[::ffff:10.1.2.3]:5555", "10.1.2.3", true},
		{"ip-full", h(), "not-an-address", "", false},
		{"ip-masked", h(), "10.1.2.3:5555", "10.1.2.0", true},
		{"ip-masked", h(), "[2001:db8:1:2:3:4:5:6]:1", "2001:db8:1:2::", true},
		{"ip-proxied", h("X-Forwarded-For", "6.6.6.6, 1.1.1.1", "X-Forwarded-For", "10.0.0.9"), "10.0.0.1:1", "1.1.1.1", true},
		// Fewer hops than trusted proxies: the leftmost hop is the caller's own writing, so the
		// peer (the nearest proxy, or the caller itself) is the identity.
		{"ip-proxied", h("X-Forwarded-For", "1.1.1.1"), "10.0.0.1:1", "10.0.0.1", true},
		{"ip-proxied", h("X-Forwarded-For", "1.1.1.1:4711, 10.0.0.9"), "10.0.0.1:1", "1.1.1.1", true},
		{"ip-proxied", h("X-Forwarded-For", "[2001:db8::7]:4711, 10.0.0.9"), "10.0.0.1:1", "2001:db8::7", true},
		{"ip-proxied", h("X-Forwarded-For", "unknown, 10.0.0.9"), "10.0.0.1:1", "10.0.0.1", true},
		{"ip-proxied", h(), "10.0.0.1:1", "10.0.0.1", true},
		{"key-or-fixed", h(), "", "1=everyone", true},
		{"key-or-fixed", h("X-API-Key", "k"), "", "0=k", true},
	} {
		got, ok, err := requestread.HTTPIdentity(&set.Rule(tc.policy).Entry, tc.header, tc.peer, nil, nil)
		if got != tc.want || ok != tc.ok || err != nil {
			t.Errorf("%s: HTTPIdentity(%v, %q) = %q, %v, %v; want %q, %v", tc.policy, tc.header, tc.peer, got, ok, err, tc.want, tc.ok)
		}
	}
}
