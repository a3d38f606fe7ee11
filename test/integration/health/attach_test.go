package health_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// TestTargetNotFoundProgressing: a policy attached to a route that does not exist (here the
// cluster serves no Gateway API at all) governs nothing and is InProgress / Progressing, not
// Degraded: a route applied in the same sync as its policy arrives by itself.
func TestTargetNotFoundProgressing(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	w.create(t, policytest.New(w.ns, "attached", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Match = v1alpha1.Match{}
		p.Spec.TargetRefs = []v1alpha1.TargetRef{{Group: "gateway.networking.k8s.io", Kind: v1alpha1.KindHTTPRoute, Name: "later"}}
	}))
	w.until(t, "attached", status.InProgressStatus, "Progressing", func(p *v1alpha1.RateLimitPolicy) error {
		if err := allConditionsCurrent(p); err != nil {
			return err
		}
		return hasCondition(p, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotAttached)
	})
}

// TestGovernsNothingVerdicts: the conditions the controller writes for an attached policy
// that governs nothing (internal/controller TestNotAttachedHealth derives them) get the
// verdicts the README's table promises from kstatus and the Argo CD Lua.
func TestGovernsNothingVerdicts(t *testing.T) {
	cases := []struct {
		reason  string
		ready   metav1.ConditionStatus
		stalled bool
		kstatus status.Status
		argo    string
	}{
		{v1alpha1.ReasonNotAttached, metav1.ConditionFalse, false, status.InProgressStatus, "Progressing"},
		{v1alpha1.ReasonConflicted, metav1.ConditionFalse, true, status.FailedStatus, "Degraded"},
		{v1alpha1.ReasonOverridden, metav1.ConditionTrue, false, status.CurrentStatus, "Healthy"},
	}
	for _, c := range cases {
		p := policytest.New("ns", "p")
		p.Generation, p.Status.ObservedGeneration = 1, 1
		cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
			return metav1.Condition{Type: typ, Status: s, Reason: c.reason, Message: "m", ObservedGeneration: 1}
		}
		p.Status.Conditions = []metav1.Condition{cond(v1alpha1.ConditionPublished, metav1.ConditionFalse), cond(v1alpha1.ConditionReady, c.ready)}
		if c.stalled {
			p.Status.Conditions = append(p.Status.Conditions, cond(v1alpha1.ConditionStalled, metav1.ConditionTrue))
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := judgeObject(t, &unstructured.Unstructured{Object: obj}).expect(c.kstatus, c.argo); err != nil {
			t.Errorf("%s: %v", c.reason, err)
		}
	}
}
