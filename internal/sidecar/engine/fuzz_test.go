package engine_test

import (
	"net/http"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// FuzzMatchHTTP drives the request → policy matcher and identity extraction with hostile
// hosts, request targets, methods and header values: no panic, a path matches what its
// normalized form matches, and every identity lands on a key whose slot is its own policy's tag.
func FuzzMatchHTTP(f *testing.F) {
	f.Add("shop.example.com:443", "/api/a/x", "GET", "key-1", "10.0.0.1:1", "1.2.3.4, 5.6.7.8")
	f.Add("", "", "", "", "", "")
	f.Add("*.x", "/api/a/../b", "post", "{rl:shop/b:victim}", "[::1]:80", "garbage,,,")
	f.Add("a\x00b", "/api/a\n", "GET\r\n", "\xff\xfe}{", "x", "2001:db8::1")
	f.Add("x", "/API/x/..;/%61;v=1/", "get", "k", "10.0.0.1:1", "")
	f.Add("x", "http://x/api//a?q=/../b", "HEAD", "k", "10.0.0.1:1", "")
	set := fuzzSet(f)
	f.Fuzz(func(t *testing.T, host, target, method, key, peer, xff string) {
		h := http.Header{"X-Api-Key": {key}, "X-Forwarded-For": {xff}, "Authorization": {"Bearer " + key}}
		path, err := httppath.ParseTarget(method, httppath.TargetPath(target))
		if err != nil {
			return // refused with 400 before any matching
		}
		matched := set.MatchHTTP(host, path, method)
		if again := mustPath(t, path.String()); !slices.Equal(names(set.MatchHTTP(host, again, method)), names(matched)) {
			t.Fatalf("%q matches %v, its normalized form %q matches otherwise", target, names(matched), path)
		}
		for _, e := range matched {
			id, ok, err := requestread.HTTPIdentity(&e.Entry, h, peer, nil, nil)
			if err != nil {
				t.Fatalf("%s: one value per header is never ambiguous: %v", e.Name(), err)
			}
			if ok && id == "" {
				t.Fatalf("%s: ok with an empty identity", e.Name())
			}
			keys := e.Policy.Keys(id, "")
			tag := keylayout.Slot("rl:shop/" + e.Name() + ":" + keylayout.EncodeValue(id))
			for _, k := range keys {
				if keylayout.Slot(k) != tag {
					t.Fatalf("%s: identity %q built key %q off its tag's slot", e.Name(), id, k)
				}
			}
		}
		if utf8.ValidString(method) && method == "GET" && len(set.MatchHTTP(host, mustPath(t, "/api/a"), method)) == 0 {
			t.Fatalf("policy a must match GET /api/a on any host")
		}
	})
}

func fuzzSet(f *testing.F) *engine.Set {
	jwt := v1alpha1.IdentitySource{Type: v1alpha1.IdentityJWTClaim, JWTClaim: &v1alpha1.JWTClaimSource{Claim: "sub"}}
	ip := v1alpha1.IdentitySource{Type: v1alpha1.IdentityClientIP, ClientIP: &v1alpha1.ClientIPSource{IPv4PrefixLength: 24, IPv6PrefixLength: 64, TrustedProxies: 1}}
	return sidecartest.Set(f, sidecartest.Policy("a", 5), sidecartest.Policy("b", 5, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{"*.example.com"}, Methods: []v1alpha1.HTTPMethod{"POST"}}}
		s.Identity.Sources = []v1alpha1.IdentitySource{jwt, ip}
	}))
}
