package engine_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestHTTPCheckRefusesRepeatedHeaders: every header the limiter reads is read once; one
// sent on two field lines is ErrRepeatedHeader, naming the header, whichever use it has.
func TestHTTPCheckRefusesRepeatedHeaders(t *testing.T) {
	claim := v1alpha1.IdentitySource{Type: v1alpha1.IdentityJWTClaim, JWTClaim: &v1alpha1.JWTClaimSource{Header: "X-Token", Claim: "sub"}}
	set := sidecartest.Set(t, sidecartest.Policy("p", 5, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity.Sources = append(s.Identity.Sources, claim)
		s.Cost = &v1alpha1.Cost{Default: 1, Header: "X-Cost", Max: new(int64(5))}
		s.Idempotency = &v1alpha1.Idempotency{Header: "X-Request-Id", TTL: metav1.Duration{Duration: time.Minute}}
	}))
	r := set.Rule("p")
	for _, tc := range []struct{ name, a, b string }{
		{"X-API-Key", "k1", "k2"}, {"X-Token", sidecartest.JWT(`{"sub":"a"}`), sidecartest.JWT(`{"sub":"b"}`)}, {"X-Cost", "1", "2"}, {"X-Request-Id", "r", "r"},
	} {
		h := http.Header{}
		if tc.name != "X-API-Key" {
			h.Set("X-Other", "x") // the key header absent, so the claim is read
		}
		h.Add(tc.name, tc.a)
		h.Add(tc.name, tc.b)
		if _, err := r.HTTPCheck(h, "10.0.0.1:1"); !errors.Is(err, requestread.ErrRepeatedHeader) || !strings.Contains(err.Error(), "header "+tc.name) {
			t.Errorf("%s twice: %v, want ErrRepeatedHeader naming it", tc.name, err)
		}
	}
	c, err := r.HTTPCheck(http.Header{"X-Api-Key": {"k"}, "X-Token": {"a", "b"}}, "")
	if err != nil || c.Identity != "0=k" {
		t.Errorf("a repeated header the check does not reach (the key wins first): %+v, %v", c, err)
	}
}
