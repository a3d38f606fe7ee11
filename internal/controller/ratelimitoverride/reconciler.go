package ratelimitoverride

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/publishing"
)

// Reconciler reports each RateLimitOverride's Ready condition. It decides nothing
// itself: the snapshot controller, which publishes overrides, records a verdict for each
// (AttachOverrides) in Publications, and this controller writes the verdict of the
// override's current generation to its status.
type Reconciler struct {
	client.Client
	// Publications holds the snapshot controller's verdicts.
	Publications *publishing.Publications
}

// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitoverrides,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitoverrides/status,verbs=patch

// Reconcile sets the override's Ready condition from its verdict, once the verdict is of its
// current generation (a newer one waits for the namespace's next sync, which tells).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var o v1alpha1.RateLimitOverride
	if err := r.Get(ctx, req.NamespacedName, &o); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	v, known, problem := r.Publications.Override(o.Namespace, o.Name)
	switch {
	case problem != "":
		v = publishing.OverrideVerdict{Reason: v1alpha1.ReasonSnapshotTooLarge, Message: problem, Generation: o.Generation}
	case !known || v.Generation != o.Generation:
		return ctrl.Result{}, nil
	}
	before := o.DeepCopy()
	status := metav1.ConditionFalse
	if v.Applied() {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status,
		Reason: v.Reason, Message: v.Message, ObservedGeneration: o.Generation})
	o.Status.ObservedGeneration = o.Generation
	if equality.Semantic.DeepEqual(before.Status, o.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.Status().Patch(ctx, &o, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patch override status: %w", client.IgnoreNotFound(err))
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller: override spec changes, and verdict changes of
// a namespace's overrides.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("override").
		For(&v1alpha1.RateLimitOverride{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Publications.OverridesChanged(), handler.EnqueueRequestsFromMapFunc(r.overridesIn))).
		Complete(r)
}

// overridesIn maps a verdict change (an object in the namespace) to its overrides.
func (r *Reconciler) overridesIn(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.RateLimitOverrideList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}
