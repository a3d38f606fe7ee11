package ratelimitpolicy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/metrictest"
)

// TestSetReady: Ready is "accepted and published" and ignores Redis; Stalled is there only
// while the policy cannot be published without a change.
func TestSetReady(t *testing.T) {
	p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	check := func(name string, status metav1.ConditionStatus, reason string, stalled bool) *metav1.Condition {
		t.Helper()
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != 3 {
			t.Fatalf("%s: Ready %+v, want %s/%s", name, c, status, reason)
		}
		s := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionStalled)
		if stalled != (s != nil) || s != nil && (s.Status != metav1.ConditionTrue || s.Reason != reason || s.ObservedGeneration != 3) {
			t.Fatalf("%s: Stalled %+v, want present %v", name, s, stalled)
		}
		return c
	}
	setReady(p)
	check("nothing known", metav1.ConditionFalse, "Unknown", false)

	setCondition(p, v1alpha1.ConditionScriptsLoaded, true, v1alpha1.ReasonScriptsLoaded, "ok")
	setCondition(p, v1alpha1.ConditionPublished, false, v1alpha1.ReasonPending, "waiting")
	setReady(p)
	if c := check("pending", metav1.ConditionFalse, v1alpha1.ReasonPending, false); c.Message != "waiting" {
		t.Fatalf("pending: message %q", c.Message)
	}

	setCondition(p, v1alpha1.ConditionPublished, true, v1alpha1.ReasonPublished, "in snapshot v1")
	setReady(p)
	if c := check("published", metav1.ConditionTrue, v1alpha1.ReasonReady, false); strings.Contains(c.Message, "Redis") {
		t.Fatalf("published: message %q", c.Message)
	}

	// Redis away: still Ready, and the message says what the sidecars do.
	setCondition(p, v1alpha1.ConditionScriptsLoaded, false, v1alpha1.ReasonRedisUnavailable, "dial tcp: refused")
	setReady(p)
	if c := check("redis down", metav1.ConditionTrue, v1alpha1.ReasonReady, false); !strings.Contains(c.Message, "failure mode FailOpen") {
		t.Fatalf("redis down: message %q", c.Message)
	}

	for _, reason := range []string{v1alpha1.ReasonSnapshotTooLarge, v1alpha1.ReasonInvalidPolicy} {
		setCondition(p, v1alpha1.ConditionPublished, false, reason, "why")
		setReady(p)
		check(reason, metav1.ConditionFalse, reason, true)
	}

	// Fixed: Stalled goes away.
	setCondition(p, v1alpha1.ConditionPublished, true, v1alpha1.ReasonPublished, "in snapshot v2")
	setReady(p)
	check("fixed", metav1.ConditionTrue, v1alpha1.ReasonReady, false)
}

// TestReadyTracker: a transition is announced once, whatever the cache still shows, and the
// ratelimit_policies{ready} gauge follows.
func TestReadyTracker(t *testing.T) {
	tr := conditionTracker{gauge: policiesByReady}
	gauge := func(s string) float64 { return metrictest.Value(t, policiesByReady.WithLabelValues(s)) }
	t0, f0 := gauge("True"), gauge("False")
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	cond := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason}
	}
	pending, ready := cond(metav1.ConditionFalse, v1alpha1.ReasonPending), cond(metav1.ConditionTrue, v1alpha1.ReasonReady)
	steps := []struct {
		name     string
		uid      types.UID
		was, now *metav1.Condition
		want     bool
		wantT    float64
		wantF    float64
	}{
		{"first reconcile", "u1", nil, pending, true, 0, 1},
		{"same again", "u1", pending, pending, false, 0, 1},
		{"published", "u1", pending, ready, true, 1, 0},
		{"stale cache shows pending", "u1", pending, ready, false, 1, 0},
		{"redis down", "u1", ready, cond(metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable), true, 0, 1},
		{"other reason, same status", "u1", nil, cond(metav1.ConditionFalse, v1alpha1.ReasonInvalidPolicy), true, 0, 1},
		{"recreated under the same name", "u2", nil, ready, true, 1, 0},
	}
	for _, s := range steps {
		if got := tr.transition(key, s.uid, s.was, s.now); got != s.want {
			t.Errorf("%s: transition %v, want %v", s.name, got, s.want)
		}
		if gt, gf := gauge("True")-t0, gauge("False")-f0; gt != s.wantT || gf != s.wantF {
			t.Errorf("%s: gauge True %+v False %+v, want %v %v", s.name, gt, gf, s.wantT, s.wantF)
		}
	}
	// A restarted controller reads Ready from the cache: no event when it is unchanged.
	fresh := conditionTracker{gauge: policiesByReady}
	other := types.NamespacedName{Namespace: "ns", Name: "q"}
	if fresh.transition(other, "u3", ready, ready) {
		t.Error("restart: unchanged Ready announced")
	}
	fresh.forget(other)
	tr.forget(key)
	tr.forget(key)
	if gt, gf := gauge("True")-t0, gauge("False")-f0; gt != 0 || gf != 0 {
		t.Errorf("after forget: gauge True %+v False %+v, want back to the start", gt, gf)
	}
}

// TestTrackerWithoutGauge: the ScriptsLoaded tracker announces transitions and leaves the
// ratelimit_policies{ready} gauge alone.
func TestTrackerWithoutGauge(t *testing.T) {
	var tr conditionTracker
	gauge := func(s string) float64 { return metrictest.Value(t, policiesByReady.WithLabelValues(s)) }
	t0, f0 := gauge("True"), gauge("False")
	key := types.NamespacedName{Namespace: "ns", Name: "s"}
	loaded := &metav1.Condition{Type: v1alpha1.ConditionScriptsLoaded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScriptsLoaded}
	down := &metav1.Condition{Type: v1alpha1.ConditionScriptsLoaded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRedisUnavailable}
	if !tr.transition(key, "u", loaded, down) || tr.transition(key, "u", loaded, down) || !tr.transition(key, "u", down, loaded) {
		t.Error("transitions not announced exactly once")
	}
	tr.forget(key)
	if gauge("True") != t0 || gauge("False") != f0 {
		t.Error("a tracker without a gauge moved ratelimit_policies")
	}
}
