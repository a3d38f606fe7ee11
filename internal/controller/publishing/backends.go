package publishing

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// redisOf is the Redis serving namespace ns, by name (backend.Default for the default one),
// as its snapshot publishes it.
func (r *Reconciler) redisOf(ctx context.Context, ns string) (string, snapshot.Redis, error) {
	if !r.Redises.Enabled() {
		return backend.Default, r.Redis, nil
	}
	rt, err := r.Redises.Route(ctx, ns)
	if err != nil {
		return "", snapshot.Redis{}, err
	}
	if rt.Backend == backend.Default {
		return backend.Default, r.Redis, nil
	}
	return rt.Backend, RedisOf(rt.Topology, r.Redis.Functions), nil
}

// RedisOf is topo as a snapshot publishes it, with whether the scripts are functions.
func RedisOf(topo redisconn.Topology, functions bool) snapshot.Redis {
	return snapshot.Redis{Mode: string(topo.Mode), Addrs: topo.Addrs, MasterName: topo.MasterName, DB: topo.DB,
		TLS: topo.TLS, Functions: functions}
}

// announceMove tells each policy of a namespace that moved from one Redis to another (to
// another backend, or its backend pointed elsewhere) that its counters start fresh:
// nothing is carried between Redises (two trust domains; the old one may be the hostile
// one), and the keys left on the old one expire by their TTL.
func (r *Reconciler) announceMove(ctx context.Context, ns string, items []v1alpha1.RateLimitPolicy, from, to redisPlace) {
	logf.FromContext(ctx).Info("namespace moved to another Redis: its counters start fresh there", "namespace", ns,
		"from", from.String(), "to", to.String())
	if r.Recorder == nil {
		return
	}
	for i := range items {
		if !items[i].DeletionTimestamp.IsZero() {
			continue
		}
		r.Recorder.Eventf(&items[i], nil, corev1.EventTypeWarning, v1alpha1.ReasonRedisChanged, "Publish",
			"namespace %s moved from %s to %s: this policy's counters start fresh there (nothing is copied between Redises), and its keys left on %s expire by their TTL",
			ns, from, to, backend.Describe(from.backend))
	}
}

// watchBackends has the snapshot of a namespace republished when the Redis serving it may
// have changed: its labels changed, or a RedisBackend was created, edited or deleted
// (every namespace with policies then).
func (r *Reconciler) watchBackends(b *builder.TypedBuilder[reconcile.Request]) *builder.TypedBuilder[reconcile.Request] {
	namespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return namespaceRequests([]string{o.GetName()})
	})
	return b.
		Watches(&corev1.Namespace{}, namespace, builder.OnlyMetadata, builder.WithPredicates(redisbackend.LabelsChanged())).
		Watches(&v1alpha1.RedisBackend{}, handler.EnqueueRequestsFromMapFunc(r.namespacesWithPolicies),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
}

// namespacesWithPolicies maps any event to every namespace that has a policy.
func (r *Reconciler) namespacesWithPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]string, len(list.Items))
	for i := range list.Items {
		out[i] = list.Items[i].Namespace
	}
	return namespaceRequests(out)
}
