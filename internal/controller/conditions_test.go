package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

func TestSetReady(t *testing.T) {
	p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	setReady(p)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != "Unknown" {
		t.Fatalf("nothing known: Ready %+v", c)
	}
	setCondition(p, v1alpha1.ConditionScriptsLoaded, true, ReasonScriptsLoaded, "ok")
	setCondition(p, v1alpha1.ConditionPublished, false, ReasonPending, "waiting")
	setReady(p)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != ReasonPending || c.Message != "waiting" {
		t.Fatalf("pending: Ready %+v", c)
	}
	setCondition(p, v1alpha1.ConditionPublished, true, ReasonPublished, "in")
	setReady(p)
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonReady || c.ObservedGeneration != 3 {
		t.Fatalf("all true: Ready %+v", c)
	}
}

// TestReadyTracker: a transition is announced once, whatever the cache still shows, and the
// ratelimit_policies{ready} gauge follows.
func TestReadyTracker(t *testing.T) {
	var tr readyTracker
	gauge := func(s string) float64 { return metricValue(t, policiesByReady.WithLabelValues(s)) }
	t0, f0 := gauge("True"), gauge("False")
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	cond := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason}
	}
	pending, ready := cond(metav1.ConditionFalse, ReasonPending), cond(metav1.ConditionTrue, ReasonReady)
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
		{"redis down", "u1", ready, cond(metav1.ConditionFalse, ReasonRedisUnavailable), true, 0, 1},
		{"other reason, same status", "u1", nil, cond(metav1.ConditionFalse, ReasonInvalidPolicy), true, 0, 1},
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
	var fresh readyTracker
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

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}
