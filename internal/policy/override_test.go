package policy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// overrideOf is an override of base() for the caller with API key "acme", giving tier pro.
func overrideOf(mutate func(*v1alpha1.RateLimitOverrideSpec)) *v1alpha1.RateLimitOverride {
	o := &v1alpha1.RateLimitOverride{ObjectMeta: metav1.ObjectMeta{Namespace: baseNamespace, Name: "acme"},
		Spec: v1alpha1.RateLimitOverrideSpec{PolicyName: baseName, Tier: "pro",
			Callers: []v1alpha1.OverrideCaller{{Value: "acme"}}}}
	if mutate != nil {
		mutate(&o.Spec)
	}
	return o
}

// tieredEntry is base() with a tier pro, as published.
func tieredEntry(t *testing.T) snapshot.Entry {
	t.Helper()
	p := base()
	withTier(`headers["x-plan"] == "pro"`, limit("default", 50, time.Second, 100))(p)
	c, errs := (policy.Rules{}).Compile(p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return c.Entry
}

// Every override that does not fit its policy is refused naming its field.
func TestOverrideRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.RateLimitOverrideSpec)
		entry  func(*snapshot.Entry)
		field  string
		msgs   []string
	}{
		{name: "unknown tier", mutate: func(s *v1alpha1.RateLimitOverrideSpec) { s.Tier = "gold" },
			field: "spec.tier", msgs: []string{"gold"}},
		{name: "limit of another period than the policy's", mutate: func(s *v1alpha1.RateLimitOverrideSpec) {
			s.Tier, s.Limits = "", []v1alpha1.Limit{limit("default", 500, time.Minute, 0)}
		}, field: "spec.limits[0].period", msgs: []string{`limit "default" has period 1s`, "one period"}},
		{name: "limits the TTL does not cover", mutate: func(s *v1alpha1.RateLimitOverrideSpec) {
			s.Tier, s.Limits = "", []v1alpha1.Limit{limit("daily", 1000, 24*time.Hour, 0)}
		}, field: "spec.limits", msgs: []string{"the policy's keyLayout.ttl", "24h0m0s"}},
		{name: "period finer than a millisecond", mutate: func(s *v1alpha1.RateLimitOverrideSpec) {
			s.Tier, s.Limits = "", []v1alpha1.Limit{limit("odd", 1, 1500*time.Microsecond, 0)}
		}, field: "spec.limits[0].period", msgs: []string{"whole number of milliseconds"}},
		{name: "source beyond the identity's", mutate: func(s *v1alpha1.RateLimitOverrideSpec) {
			s.Callers = []v1alpha1.OverrideCaller{{Value: "10.0.0.1", Source: ptr.To[int32](2)}}
		}, field: "spec.callers[0].source", msgs: []string{"2 sources"}},
		{name: "burst on a window", entry: func(e *snapshot.Entry) { e.Algorithm = string(v1alpha1.AlgorithmFixedWindow) },
			mutate: func(s *v1alpha1.RateLimitOverrideSpec) {
				s.Tier, s.Limits = "", []v1alpha1.Limit{limit("default", 50, time.Second, 60)}
			}, field: "spec.limits[0].burst", msgs: []string{"TokenBucket or GCRA"}},
		{name: "value for a composite identity", entry: func(e *snapshot.Entry) {
			e.Identity.Parts = []snapshot.IdentityPart{{Sources: e.Identity.Sources[:1]}, {Sources: e.Identity.Sources[1:]}}
			e.Identity.Sources = nil
		}, field: "spec.callers[0].value", msgs: []string{"identity.parts", "hash"}},
		{name: "sharded policy", entry: func(e *snapshot.Entry) { e.Shards = 4 },
			field: "spec.policyName", msgs: []string{"hotKeys.shards"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tieredEntry(t)
			if tc.entry != nil {
				tc.entry(&e)
			}
			_, errs := policy.Override(e, baseNamespace, overrideOf(tc.mutate))
			found := false
			for _, err := range errs {
				if strings.HasPrefix(err.Field, tc.field) && containsAll(err.Error(), tc.msgs) {
					found = true
				}
			}
			if !found {
				t.Errorf("no error on %s containing %q; got %v", tc.field, tc.msgs, errs)
			}
		})
	}
}

// An override's callers reach the snapshot as the hashes of the identities the sidecar
// counts (the source's position prefixed with several sources), sorted and deduplicated,
// and never as values.
func TestOverrideHashesCallers(t *testing.T) {
	e := tieredEntry(t) // two sources: X-API-Key, then the client address
	o := overrideOf(func(s *v1alpha1.RateLimitOverrideSpec) {
		s.Callers = []v1alpha1.OverrideCaller{{Value: "acme-key-123"}, {Value: "10.1.2.3", Source: ptr.To[int32](1)},
			{Hash: snapshot.IdentityHash("0=acme-key-123")}}
		s.Expires = &metav1.Time{Time: time.UnixMilli(1_900_000_000_000)}
	})
	got, errs := policy.Override(e, baseNamespace, o)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	want := []string{snapshot.IdentityHash("0=acme-key-123"), snapshot.IdentityHash("1=10.1.2.3")}
	if want[0] > want[1] {
		want[0], want[1] = want[1], want[0]
	}
	if strings.Join(got.Callers, ",") != strings.Join(want, ",") || got.Tier != "pro" || got.ExpiresMs != 1_900_000_000_000 {
		t.Fatalf("override %+v, want callers %v, tier pro, expiry 1900000000000", got, want)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "acme-key") || strings.Contains(string(b), "10.1.2.3") {
		t.Fatalf("a caller's value reached the wire form: %s", b)
	}
}
