package ratelimitpolicy

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
)

// TestNotAttachedHealth: a policy with targetRefs that governs nothing is, as kstatus sees
// it, Current when every target is accepted but overridden (the Gateway owner's choice, no
// page), Failed when a target is conflicted (only a policy change ends it), and InProgress
// while a target is missing (it may still appear), whatever else its other targets say.
func TestNotAttachedHealth(t *testing.T) {
	ok := attachment.Condition{OK: true, Reason: v1alpha1.AncestorReasonAccepted}
	overridden := attachment.Condition{Reason: v1alpha1.ReasonOverridden, Message: "route a"}
	conflicted := attachment.Condition{Reason: v1alpha1.ReasonConflicted, Message: "held by x"}
	missing := attachment.Condition{Reason: v1alpha1.AncestorReasonTargetNotFound, Message: "no route"}
	notAccepted := attachment.Condition{Reason: v1alpha1.AncestorReasonNotAccepted}
	cases := []struct {
		name      string
		ancestors []attachment.Ancestor
		reason    string
		kstatus   status.Status
	}{
		{"overridden", []attachment.Ancestor{{Accepted: ok, Enforced: overridden}}, v1alpha1.ReasonOverridden, status.CurrentStatus},
		{"conflicted", []attachment.Ancestor{{Accepted: ok, Enforced: overridden}, {Accepted: conflicted, Enforced: notAccepted}}, v1alpha1.ReasonConflicted, status.FailedStatus},
		{"missing", []attachment.Ancestor{{Accepted: conflicted, Enforced: notAccepted}, {Accepted: missing, Enforced: notAccepted}}, v1alpha1.ReasonNotAttached, status.InProgressStatus},
	}
	for _, c := range cases {
		p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: 2}}
		p.Status.ObservedGeneration = 2
		notAttached(p, &attachment.Result{Ancestors: c.ancestors})
		setReady(p)
		if pub := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionPublished); pub.Status != metav1.ConditionFalse || pub.Reason != c.reason {
			t.Errorf("%s: Published %s/%s, want False/%s", c.name, pub.Status, pub.Reason, c.reason)
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := status.Compute(&unstructured.Unstructured{Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != c.kstatus {
			t.Errorf("%s: kstatus %s (%s), want %s; conditions %+v", c.name, res.Status, res.Message, c.kstatus, p.Status.Conditions)
		}
	}
}
