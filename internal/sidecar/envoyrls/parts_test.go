package envoyrls_test

import (
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// On Envoy RLS a composite identity's parts read descriptor entries: each combination of
// user and route entry has its own limit, a user value spelling another combination's
// parts spends only its own, and a descriptor without a part is onMissing's (Reject here).
func TestEnvoyCompositeIdentity(t *testing.T) {
	entry := func(key string) v1alpha1.IdentitySources {
		return v1alpha1.IdentitySources{{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: key}}}
	}
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("api", "/api", 2, time.Minute,
		func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity = v1alpha1.Identity{Parts: []v1alpha1.IdentityPart{{Sources: entry("user")}, {Sources: entry("path")}},
				OnMissing: v1alpha1.MissingIdentityReject}
		}))
	admitted := func(kv ...string) int {
		n := 0
		for range 4 {
			if h.envoyCall(t, envoyReq(0, envoyDesc(append([]string{"route", "/api"}, kv...)...))).GetOverallCode() == codeOK {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		kv   []string
		want int
	}{
		{[]string{"user", "u1", "path", "/a"}, 2},
		{[]string{"user", "u1", "path", "/b"}, 2},
		{[]string{"user", "u2", "path", "/a"}, 2},
		{[]string{"user", "u1+2./a", "path", "/b"}, 2}, // spells u1's /a combination under a naive join
		{[]string{"user", "u1", "path", "/a"}, 0},      // spent above
		{[]string{"user", "u3"}, 0},                    // no path part: rejected
	} {
		if got := admitted(tc.kv...); got != tc.want {
			t.Errorf("%v: %d of 4 admitted, want %d", tc.kv, got, tc.want)
		}
	}
}
