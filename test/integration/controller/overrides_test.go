package controller

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// tieredPolicy is newPolicy with a tier pro of 50 per second on its counter.
func tieredPolicy(ns, name string) *v1alpha1.RateLimitPolicy {
	p := newPolicy(ns, name, 10)
	p.Spec.Tiers = []v1alpha1.Tier{{Name: "pro", When: `headers["x-plan"] == "pro"`,
		Limits: []v1alpha1.Limit{{Name: p.Spec.Limits[0].Name, Requests: 50, Period: p.Spec.Limits[0].Period}}}}
	return p
}

// newOverride is an override of policyName giving callers tier pro.
func newOverride(ns, name, policyName string, callers ...string) *v1alpha1.RateLimitOverride {
	o := &v1alpha1.RateLimitOverride{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RateLimitOverrideSpec{PolicyName: policyName, Tier: "pro"}}
	for _, c := range callers {
		o.Spec.Callers = append(o.Spec.Callers, v1alpha1.OverrideCaller{Value: c})
	}
	return o
}

// waitOverride waits until override name's Ready condition has status and reason, for its
// current generation.
func waitOverride(t testing.TB, e *kube.Env, ns, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	var o v1alpha1.RateLimitOverride
	wait.Eventually(t, readyTimeout, fmt.Sprintf("override %s Ready=%s (%s)", name, status, reason), func() error {
		if err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &o); err != nil {
			return err
		}
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != o.Generation {
			return fmt.Errorf("conditions %+v at generation %d", o.Status.Conditions, o.Generation)
		}
		return nil
	})
}

// An override is published with its policy and reports Ready=True Applied; one naming a
// missing policy or tier, or expired, reports why and is not published; one expiring is
// dropped at its expiry; and the policy stays Ready throughout (its publication check
// ignores the overrides the snapshot adds to its entry).
func TestOverrideLifecycle(t *testing.T) {
	e, ns := suiteNamespace(t)
	create(t, e, tieredPolicy(ns, "plans"))
	waitReady(t, e, ns, "plans")
	soon := metav1.NewTime(time.Now().Add(4 * time.Second))
	expiring := newOverride(ns, "expiring", "plans", "acme-week")
	expiring.Spec.Expires = &soon
	badTier := newOverride(ns, "bad-tier", "plans", "x")
	badTier.Spec.Tier = "gold"
	create(t, e, newOverride(ns, "vip", "plans", "acme"), newOverride(ns, "orphan", "missing", "y"), badTier, expiring)

	waitOverride(t, e, ns, "vip", metav1.ConditionTrue, v1alpha1.ReasonOverrideApplied)
	waitOverride(t, e, ns, "expiring", metav1.ConditionTrue, v1alpha1.ReasonOverrideApplied)
	waitOverride(t, e, ns, "orphan", metav1.ConditionFalse, v1alpha1.ReasonPolicyNotFound)
	waitOverride(t, e, ns, "bad-tier", metav1.ConditionFalse, v1alpha1.ReasonInvalidOverride)
	_, s := waitSnapshot(t, e, ns, "plans")
	if got := overrideNames(s); got != "expiring,vip" {
		t.Fatalf("published overrides %q, want expiring,vip", got)
	}
	waitReady(t, e, ns, "plans")

	waitOverride(t, e, ns, "expiring", metav1.ConditionFalse, v1alpha1.ReasonExpired)
	wait.Eventually(t, readyTimeout, "the expired override dropped from the snapshot", func() error {
		_, s, err := getSnapshot(e, ns)
		if err != nil {
			return err
		}
		if got := overrideNames(s); got != "vip" {
			return fmt.Errorf("published overrides %q", got)
		}
		return nil
	})
	waitReady(t, e, ns, "plans")
}

// overrideNames lists the overrides s publishes, comma-separated, by policy then name.
func overrideNames(s *snapshot.Snapshot) string {
	out := ""
	for _, p := range s.Policies {
		for _, o := range p.Overrides {
			if out != "" {
				out += ","
			}
			out += o.Name
		}
	}
	return out
}

// 10,000 overridden callers in one namespace (100 overrides of 100 callers each, as a
// platform team syncing its customers' plans would write them) are published in one snapshot
// and enforced by a sidecar: each caller gets its override's tier and every other caller its
// own. Measured: the snapshot's bytes, the time from the last create to every override
// Ready, the sidecar's load time and its heap per overridden caller.
func TestTenThousandOverrides(t *testing.T) {
	const objects, perObject = 100, 100
	e, ns := suiteNamespace(t)
	create(t, e, tieredPolicy(ns, "plans"))
	waitReady(t, e, ns, "plans")
	for i := range objects {
		callers := make([]string, perObject)
		for j := range callers {
			callers[j] = fmt.Sprintf("customer-%03d-%03d", i, j)
		}
		create(t, e, newOverride(ns, fmt.Sprintf("plan-%03d", i), "plans", callers...))
	}
	created := time.Now()
	for i := range objects {
		waitOverride(t, e, ns, fmt.Sprintf("plan-%03d", i), metav1.ConditionTrue, v1alpha1.ReasonOverrideApplied)
	}
	ready := time.Since(created)
	cm, s := waitSnapshot(t, e, ns, "plans")
	n := 0
	for _, o := range s.Policies[0].Overrides {
		n += len(o.Callers)
	}
	if n != objects*perObject {
		t.Fatalf("published %d callers, want %d", n, objects*perObject)
	}
	data := []byte(cm.Data[snapshot.DataKey])

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	store := &engine.Store{Namespace: ns}
	start := time.Now()
	if err := store.Load(data, "test"); err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	rule := store.Current().Rule("plans")
	for _, c := range []struct {
		identity, tier string
	}{{"customer-000-000", "pro"}, {"customer-057-042", "pro"}, {"customer-099-099", "pro"}, {"customer-100-000", "default"}, {"someone", "default"}} {
		check := engine.Check{Identity: c.identity, HasIdentity: true}
		tier, err := rule.CallerTier(&check, func() (*engine.Tier, error) { return rule.Default(), nil })
		if err != nil || tier.Name != c.tier {
			t.Errorf("%s: tier %v (%v), want %s", c.identity, tier, err, c.tier)
		}
	}
	t.Logf("10,000 overridden callers: snapshot %d bytes (%.1f per caller; budget %d), all %d overrides Ready %v after the last create, sidecar load %v, heap %.0f bytes per caller",
		len(data), float64(len(data))/float64(n), snapshot.MaxBytes, objects, ready.Round(time.Millisecond), load.Round(time.Microsecond),
		float64(after.HeapAlloc-before.HeapAlloc)/float64(n))
	runtime.KeepAlive(store)
}
