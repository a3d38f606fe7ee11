package engine_test

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// BenchmarkPlanHTTP is the per-request cost of reading an HTTP request's checks (match,
// identity, cost, tier) for a plain policy, for policies with tiers and for a composite
// identity (API key, route and method): the price of choosing a tier, or of combining
// parts, is the difference, measured in the same run.
func BenchmarkPlanHTTP(b *testing.B) {
	tier := func(when string) func(*v1alpha1.RateLimitPolicySpec) {
		return func(s *v1alpha1.RateLimitPolicySpec) {
			s.Tiers = []v1alpha1.Tier{{Name: "pro", When: when,
				Limits: []v1alpha1.Limit{{Name: "per-minute", Requests: 500, Period: metav1.Duration{Duration: time.Minute}}}}}
		}
	}
	h := http.Header{}
	for _, k := range []string{"Accept", "User-Agent", "X-Request-Id", "Content-Type"} {
		h.Set(k, "value")
	}
	h.Set("X-API-Key", "key-1")
	h.Set("X-Plan", "pro")
	h.Set("Authorization", sidecartest.JWT(`{"sub":"u1","plan":"pro"}`))
	path, _, err := requestread.ParseTarget(http.MethodGet, "/api/plans/items")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edits []func(*v1alpha1.RateLimitPolicySpec)
	}{
		{"plain", nil},
		{"tier-header", []func(*v1alpha1.RateLimitPolicySpec){tier(`headers["x-plan"] == "pro"`)}},
		{"tier-claim", []func(*v1alpha1.RateLimitPolicySpec){tier(`claims.plan == "pro"`)}},
		{"parts-key-route-method", []func(*v1alpha1.RateLimitPolicySpec){func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity = v1alpha1.Identity{Parts: []v1alpha1.IdentityPart{
				{Sources: v1alpha1.IdentitySources{{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}}}},
				{Sources: v1alpha1.IdentitySources{{Type: v1alpha1.IdentityPathPrefix}}},
				{Sources: v1alpha1.IdentitySources{{Type: v1alpha1.IdentityMethod}}},
			}}
		}}},
	} {
		set := sidecartest.Set(b, sidecartest.Policy("plans", 10, tc.edits...))
		req := &requestread.HTTPRequest{Method: http.MethodGet, Host: "api.example.com", Path: path, Header: h, Peer: "10.0.0.1:5000"}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rules, checks, err := set.PlanHTTP(req)
				if err != nil || len(rules) != 1 || (len(tc.edits) > 0 && len(rules[0].Tiers()) > 0 && checks[0].Tier.Name != "pro") || !checks[0].HasIdentity {
					b.Fatal(err, len(rules))
				}
			}
		})
	}
}
