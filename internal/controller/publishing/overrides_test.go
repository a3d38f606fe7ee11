package publishing

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

func testOverride(name, policyName string, edit func(*v1alpha1.RateLimitOverrideSpec)) v1alpha1.RateLimitOverride {
	o := v1alpha1.RateLimitOverride{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Generation: 3},
		Spec: v1alpha1.RateLimitOverrideSpec{PolicyName: policyName, Tier: snapshot.DefaultTier,
			Callers: []v1alpha1.OverrideCaller{{Value: "caller-" + name}}}}
	if edit != nil {
		edit(&o.Spec)
	}
	return o
}

// Each override gets a verdict naming why it is left out, only applied ones reach their
// policy's entry (a kept entry's old overrides are replaced), the earliest future expiry is
// reported for the requeue, and the policy's own publication check ignores overrides.
func TestAttachOverridesVerdicts(t *testing.T) {
	now := time.Now()
	soon, past := metav1.NewTime(now.Add(time.Hour)), metav1.NewTime(now.Add(-time.Second))
	s, _, err := SnapshotOver(policy.Rules{}, "shop", snapshot.Redis{Mode: "standalone", Addrs: []string{"r:6379"}},
		[]v1alpha1.RateLimitPolicy{testPolicy("shop", "orders", 5)}, Published{})
	if err != nil {
		t.Fatal(err)
	}
	plain := s.Policies[0]
	s.Policies[0].Overrides = []snapshot.Override{{Name: "stale", Tier: "default", Callers: []string{"0000000000000000"}}}
	verdicts, next, err := AttachOverrides(s, []v1alpha1.RateLimitOverride{
		testOverride("b-applied", "orders", func(o *v1alpha1.RateLimitOverrideSpec) { o.Expires = &soon }),
		testOverride("a-applied", "orders", nil),
		testOverride("no-policy", "missing", nil),
		testOverride("expired", "orders", func(o *v1alpha1.RateLimitOverrideSpec) { o.Expires = &past }),
		testOverride("bad-tier", "orders", func(o *v1alpha1.RateLimitOverrideSpec) { o.Tier = "gold" }),
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	checkVerdicts(t, verdicts)
	got := s.Policies[0].Overrides
	if len(got) != 2 || got[0].Name != "a-applied" || got[1].Name != "b-applied" || got[1].ExpiresMs != soon.UnixMilli() {
		t.Fatalf("published overrides %+v, want a-applied then b-applied (expiring), the stale one gone", got)
	}
	if !next.Equal(soon.Time) {
		t.Errorf("next expiry %v, want %v", next, soon.Time)
	}
	if entryHash(s.Policies[0]) != entryHash(plain) {
		t.Error("an entry with overrides does not match the policy's own compiled entry: the policy would never report Published")
	}
	checkRecorded(t, s, verdicts)
}

// checkVerdicts: each override of TestAttachOverridesVerdicts has its reason, at its
// generation, with a message naming the field at fault.
func checkVerdicts(t *testing.T, verdicts map[string]OverrideVerdict) {
	t.Helper()
	want := map[string]string{"a-applied": v1alpha1.ReasonOverrideApplied, "b-applied": v1alpha1.ReasonOverrideApplied,
		"no-policy": v1alpha1.ReasonPolicyNotFound, "expired": v1alpha1.ReasonExpired, "bad-tier": v1alpha1.ReasonInvalidOverride}
	for name, reason := range want {
		if v := verdicts[name]; v.Reason != reason || v.Generation != 3 || v.Message == "" {
			t.Errorf("%s: verdict %+v, want reason %s at generation 3 with a message", name, v, reason)
		}
	}
	if !strings.Contains(verdicts["bad-tier"].Message, "spec.tier") || !strings.Contains(verdicts["no-policy"].Message, "spec.policyName") {
		t.Errorf("messages do not name the field: %+v", verdicts)
	}
}

// checkRecorded: Publications hands the override controller the verdicts a sync recorded.
func checkRecorded(t *testing.T, s *snapshot.Snapshot, verdicts map[string]OverrideVerdict) {
	t.Helper()
	p := &Publications{}
	st := stateOf(s)
	st.overrides = verdicts
	p.record(context.Background(), "shop", st)
	if v, known, _ := p.Override("shop", "bad-tier"); !known || v.Reason != v1alpha1.ReasonInvalidOverride {
		t.Errorf("Publications.Override: %+v known %v", v, known)
	}
}
