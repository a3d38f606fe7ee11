package publishing

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// SetupWithManager registers the controller: policy spec changes and deletions, and any
// change to a snapshot ConfigMap (a hand edit or delete is repaired), and override spec
// changes and deletions, enqueue the namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	delay := r.CoalesceDelay
	if delay <= 0 {
		delay = 250 * time.Millisecond
	}
	enqueue := func(delay time.Duration) handler.EventHandler {
		return handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.AddAfter(nsKey(e.Object), delay)
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.AddAfter(nsKey(e.ObjectNew), delay)
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.AddAfter(nsKey(e.Object), delay)
			},
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("snapshot").
		Watches(&v1alpha1.RateLimitPolicy{}, enqueue(delay),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, enqueue(0), builder.WithPredicates(isSnapshot()))
	if r.Redises.Enabled() {
		b = r.watchBackends(b)
	}
	if r.Overrides {
		b = b.Watches(&v1alpha1.RateLimitOverride{}, enqueue(delay),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	if r.Gateways != nil {
		// A route or Gateway change moves what the namespace's attached policies govern.
		toNamespaces := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return namespaceRequests(r.Gateways.RouteNamespaces(ctx, o))
		})
		for _, o := range r.Gateways.Watched() {
			b = b.Watches(o, toNamespaces, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
		}
	}
	return b.Complete(r)
}

func nsKey(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: snapshot.ConfigMapName}}
}

// isSnapshot selects snapshot ConfigMaps by name: a hand edit that drops the label must
// still be repaired.
func isSnapshot() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetName() == snapshot.ConfigMapName
	})
}

// namespaceRequests maps namespaces to the controller's requests.
func namespaceRequests(nss []string) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(nss))
	seen := map[string]bool{}
	for _, ns := range nss {
		if !seen[ns] {
			seen[ns] = true
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}})
		}
	}
	return out
}
