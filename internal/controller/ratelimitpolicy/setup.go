package ratelimitpolicy

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// SetupWithManager registers the controller: policy spec changes and deletions, changes of
// what a namespace's snapshot holds (to report Published), and script-state changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.ready.gauge = policiesByReady
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RateLimitPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Snapshots.Changed(), handler.EnqueueRequestsFromMapFunc(r.policiesIn))).
		WatchesRawSource(source.Channel(r.Scripts.Changed(), handler.EnqueueRequestsFromMapFunc(r.allPolicies))).
		// Policies are independent; 4 workers shorten a bulk apply's time to Ready
		// (docs/benchmarks.md, "Measurements behind the defaults").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	if r.MemoryChanged != nil {
		b = b.WatchesRawSource(source.Channel(r.MemoryChanged, handler.EnqueueRequestsFromMapFunc(r.allPolicies)))
	}
	if r.Redises.Enabled() {
		// A backend's scripts or memory changed, or it connected or went.
		b = b.WatchesRawSource(source.Channel(r.Redises.PolicyEvents(), handler.EnqueueRequestsFromMapFunc(r.allPolicies)))
	}
	return r.watchAttachments(b).Complete(r)
}

// watchAttachments re-evaluates attached policies when what they attach to changes: a
// route or Gateway (their namespaces' policies), or another policy of the namespace (a
// conflict won or given up).
func (r *Reconciler) watchAttachments(b *builder.TypedBuilder[reconcile.Request]) *builder.TypedBuilder[reconcile.Request] {
	inNamespaces := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		for _, ns := range r.Gateways.RouteNamespaces(ctx, o) {
			out = append(out, r.attachedIn(ctx, ns, "")...)
		}
		return out
	})
	for _, o := range r.Gateways.Watched() { // none without Gateway API
		b = b.Watches(o, inNamespaces, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Watches(&v1alpha1.RateLimitPolicy{}, handler.EnqueueRequestsFromMapFunc(r.attachedPeers),
		builder.WithPredicates(predicate.GenerationChangedPredicate{}))
}

// attachedPeers maps a policy event to the other policies of its namespace with targetRefs.
func (r *Reconciler) attachedPeers(ctx context.Context, o client.Object) []reconcile.Request {
	return r.attachedIn(ctx, o.GetNamespace(), o.GetName())
}

// attachedIn are the policies of ns with targetRefs, but the one named except.
func (r *Reconciler) attachedIn(ctx context.Context, ns, except string) []reconcile.Request {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if len(list.Items[i].Spec.TargetRefs) > 0 && list.Items[i].Name != except {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// policiesIn maps a snapshot change (an object in the namespace) to the namespace's policies.
func (r *Reconciler) policiesIn(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requests(ctx, client.InNamespace(o.GetNamespace()))
}

// allPolicies maps a script-state change to every policy.
func (r *Reconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.requests(ctx)
}

func (r *Reconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}
