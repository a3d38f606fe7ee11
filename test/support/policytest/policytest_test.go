package policytest_test

import (
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// TestNewIsValidWithoutWarnings: the base policy, and the base with every option, compiles
// after defaulting and draws no warning, as New's doc promises the tests that start from it.
func TestNewIsValidWithoutWarnings(t *testing.T) {
	for name, p := range map[string]*v1alpha1.RateLimitPolicy{
		"base": policytest.New("shop", "base"),
		"every option": policytest.New("shop", "all", policytest.TypeMeta, policytest.Paths("/a", "/b"),
			policytest.Methods("GET"), policytest.Sources(policytest.Header("X-User"),
				v1alpha1.IdentitySource{Type: v1alpha1.IdentityClientIP}),
			policytest.OnMissing(v1alpha1.MissingIdentityReject), policytest.Algorithm(v1alpha1.AlgorithmGCRA),
			policytest.Limit("per-minute", 60, time.Minute), policytest.Requests(30), policytest.Burst(40),
			policytest.FailureMode(v1alpha1.FailureModeFailClosed)),
	} {
		t.Run(name, func(t *testing.T) {
			(policy.Rules{}).Default(p)
			if _, errs := (policy.Rules{}).Compile(p); len(errs) > 0 {
				t.Fatalf("invalid: %v", errs.ToAggregate())
			}
			if w := policy.Warnings(nil, p); len(w) > 0 {
				t.Fatalf("warnings: %q", w)
			}
		})
	}
	p := policytest.New("shop", "x", policytest.Limit("l", 5, time.Minute), policytest.Burst(7))
	if l := p.Spec.Limits[0]; l.Name != "l" || l.Requests != 5 || l.Period.Duration != time.Minute || *l.Burst != 7 {
		t.Errorf("options not applied in order: %+v", l)
	}
}
