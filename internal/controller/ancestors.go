package controller

import (
	"context"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

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

// attach resolves p's targets and writes its ancestors; it returns the resolution (nil
// without targetRefs) and the policy as the sidecars run it, ok false when it governs
// nothing (Published says why). A policy that no longer has targetRefs loses its data plane
// objects here.
func (r *PolicyReconciler) attach(ctx context.Context, p *v1alpha1.RateLimitPolicy) (res *attachment.Result, eff *v1alpha1.RateLimitPolicy, ok bool, err error) {
	if len(p.Spec.TargetRefs) == 0 {
		if p.Status.Ancestors == nil { // never attached: nothing to remove, no List to pay
			return nil, p, true, nil
		}
		p.Status.Ancestors = nil
		return nil, p, true, r.DataPlane.Remove(ctx, p)
	}
	if res, err = r.Gateways.ResolveFor(ctx, p); err != nil {
		return nil, nil, false, err
	}
	setAncestors(p, res)
	eff, ok = attachment.Effective(p, res)
	if !ok {
		notAttached(p, res)
	}
	return res, eff, ok, nil
}

// programDataPlane keeps the gateways' objects of an attached policy. The snapshot does not
// depend on them: a failure is a Warning event and a retry, not a condition.
func (r *PolicyReconciler) programDataPlane(ctx context.Context, p *v1alpha1.RateLimitPolicy, res *attachment.Result) error {
	if res == nil {
		return nil
	}
	err := r.DataPlane.Sync(ctx, p, res)
	if err != nil && r.Recorder != nil {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "DataPlaneFailed", "Reconcile", "%s", err.Error())
	}
	return err
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
