package ratelimitpolicy

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/gatewayapi"
	"github.com/ratelimit-dev/ratelimit-operator/internal/eventnote"
)

// attach resolves p's targets and writes its ancestors; it returns the resolution (nil
// without targetRefs) and the policy as the sidecars run it, ok false when it governs
// nothing (Published says why). A policy that no longer has targetRefs loses its data plane
// objects here.
func (r *Reconciler) attach(ctx context.Context, p *v1alpha1.RateLimitPolicy) (res *attachment.Result, eff *v1alpha1.RateLimitPolicy, ok bool, err error) {
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
	gatewayapi.SetAncestors(p, res)
	eff, ok = attachment.Effective(p, res)
	if !ok {
		notAttached(p, res)
	}
	return res, eff, ok, nil
}

// programDataPlane keeps the gateways' objects of an attached policy. The snapshot does not
// depend on them: a failure is a Warning event and a retry, not a condition.
func (r *Reconciler) programDataPlane(ctx context.Context, p *v1alpha1.RateLimitPolicy, res *attachment.Result) error {
	if res == nil {
		return nil
	}
	err := r.DataPlane.Sync(ctx, p, res)
	if err != nil && r.Recorder != nil {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "DataPlaneFailed", "Reconcile", "%s", eventnote.OneLine(err.Error()))
	}
	return err
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
func (r *Reconciler) invalidAncestors(ctx context.Context, p *v1alpha1.RateLimitPolicy, msg string) {
	res, err := r.Gateways.ResolveFor(ctx, p)
	if err != nil || res == nil {
		return // no targetRefs, or the next reconcile tells
	}
	for i := range res.Ancestors {
		res.Ancestors[i].Accepted = attachment.Condition{Reason: v1alpha1.AncestorReasonInvalid, Message: msg}
		res.Ancestors[i].Enforced = attachment.Condition{Reason: v1alpha1.AncestorReasonNotAccepted, Message: "the policy does not compile"}
	}
	gatewayapi.SetAncestors(p, res)
}
