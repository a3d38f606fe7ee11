package controller

import (
	"context"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
)

// setAncestors writes status.ancestors from res, keeping each condition's transition time
// while its status holds.
func setAncestors(p *v1alpha1.RateLimitPolicy, res *attachment.Result) {
	if res == nil {
		p.Status.Ancestors = nil
		return
	}
	out := make([]gwapiv1.PolicyAncestorStatus, 0, len(res.Ancestors))
	for _, a := range res.Ancestors {
		st := gwapiv1.PolicyAncestorStatus{AncestorRef: a.Ref, ControllerName: v1alpha1.ControllerName}
		if prev := findAncestor(p.Status.Ancestors, a.Ref); prev != nil {
			st.Conditions = append([]metav1.Condition(nil), prev.Conditions...)
		}
		meta.SetStatusCondition(&st.Conditions, ancestorCondition(p, string(gwapiv1.PolicyConditionAccepted), a.Accepted))
		meta.SetStatusCondition(&st.Conditions, ancestorCondition(p, v1alpha1.AncestorConditionEnforced, a.Enforced))
		out = append(out, st)
	}
	p.Status.Ancestors = out
}

func ancestorCondition(p *v1alpha1.RateLimitPolicy, typ string, c attachment.Condition) metav1.Condition {
	status := metav1.ConditionFalse
	if c.OK {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: c.Reason, Message: truncate(c.Message), ObservedGeneration: p.Generation}
}

// maxMessage bounds an ancestor condition's message: a Gateway with many routes names them
// all, and the API allows 32768 bytes per message, 16 ancestors and 8 conditions each.
const maxMessage = 1024

func truncate(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

func findAncestor(list []gwapiv1.PolicyAncestorStatus, ref gwapiv1.ParentReference) *gwapiv1.PolicyAncestorStatus {
	for i := range list {
		if list[i].ControllerName == v1alpha1.ControllerName && equality.Semantic.DeepEqual(list[i].AncestorRef, ref) {
			return &list[i]
		}
	}
	return nil
}

// notAttached reports a policy with targetRefs that governs nothing, with the reason its
// ancestors call for (see v1alpha1.ReasonNotAttached).
func notAttached(p *v1alpha1.RateLimitPolicy, res *attachment.Result) {
	var why []string
	reason := v1alpha1.ReasonOverridden
	for _, a := range res.Ancestors {
		c := a.Enforced
		if !a.Accepted.OK {
			c = a.Accepted
			reason = worseReason(reason, a.Accepted.Reason)
		}
		why = append(why, c.Reason+": "+c.Message)
	}
	msg := "the policy governs no traffic"
	if len(why) > 0 {
		msg += ": " + strings.Join(why, "; ")
	}
	p.Status.Snapshot = nil
	setCondition(p, v1alpha1.ConditionPublished, false, reason, msg)
}

// worseReason folds one ancestor's Accepted reason into the policy's: a missing target
// (which may still appear) outranks a conflict, which outranks being overridden.
func worseReason(have, accepted string) string {
	if have == v1alpha1.ReasonNotAttached || accepted == v1alpha1.AncestorReasonTargetNotFound {
		return v1alpha1.ReasonNotAttached
	}
	return v1alpha1.ReasonConflicted
}

// invalidAncestors reports a policy that does not compile as Invalid on every ancestor its
// targets lead to.
func (r *PolicyReconciler) invalidAncestors(ctx context.Context, p *v1alpha1.RateLimitPolicy, msg string) {
	res, err := r.Gateways.ResolveFor(ctx, p)
	if err != nil || res == nil {
		return // no targetRefs, or the next reconcile tells
	}
	for i := range res.Ancestors {
		res.Ancestors[i].Accepted = attachment.Condition{Reason: v1alpha1.AncestorReasonInvalid, Message: msg}
		res.Ancestors[i].Enforced = attachment.Condition{Reason: v1alpha1.AncestorReasonNotAccepted, Message: "the policy does not compile"}
	}
	setAncestors(p, res)
}
