package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/eventnote"
)

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
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "DataPlaneFailed", "Reconcile", "%s", eventnote.OneLine(err.Error()))
	}
	return err
}
