package redisbackend

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Reconciler keeps each RedisBackend connected (Redises.connect: its Secrets
// read through the API server, uncached, every Refresh) on every replica, and on the leader
// reports its status: the namespaces it serves, Conflict, Connected, ScriptsLoaded,
// UsersReady (with per-namespace users) and Ready.
type Reconciler struct {
	client.Client
	// APIReader reads the backends' Secrets: the manager caches no Secret but its tenants'.
	APIReader client.Reader
	// Redises holds the connections.
	Redises *Redises
	// Elected is closed once this replica leads: only the leader writes status.
	Elected <-chan struct{}
	// Users reports UsersReady: per-namespace users are on.
	Users bool
	// Refresh is how often the Secrets are read again and the status looked at. Default
	// DefaultRefresh.
	Refresh time.Duration
}

// A backend's administrative credentials (and CA) live in Secrets of the operator's own
// namespace ("system" here, the kustomize and Helm installs put their namespace in): the
// Role generated for this rule is bound there only, and the manager never lists or watches
// Secrets for it (one Get per backend and Refresh, through the uncached reader).
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=redisbackends,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=redisbackends/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get

// Reconcile connects the backend, and on the leader writes its status (deferred patch).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	var b v1alpha1.RedisBackend
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		if apierrors.IsNotFound(err) {
			r.Redises.disconnect(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	res = ctrl.Result{RequeueAfter: r.refresh()}
	connErr := r.connect(ctx, &b)
	if connErr != nil {
		res.RequeueAfter = Retry
	}
	if !r.leading() {
		return res, nil
	}
	before := b.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, &b); err != nil && retErr == nil {
			retErr = err
		}
	}()
	return res, r.report(ctx, &b, connErr)
}

func (r *Reconciler) refresh() time.Duration {
	if r.Refresh <= 0 {
		return DefaultRefresh
	}
	return r.Refresh
}

func (r *Reconciler) leading() bool {
	select {
	case <-r.Elected:
		return true
	default:
		return false
	}
}

// SetupWithManager registers the controller on every replica (each connects; the leader
// writes status): a backend's spec changes (every backend's status, for conflicts),
// namespaces created or relabelled, and its connection's state changing.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allBackends)
	return ctrl.NewControllerManagedBy(mgr).
		Named("redisbackend").
		For(&v1alpha1.RedisBackend{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.RedisBackend{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, all, builder.OnlyMetadata, builder.WithPredicates(namespaceChanges())).
		WatchesRawSource(source.Channel(r.Redises.statuses, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// allBackends maps any event to every RedisBackend.
func (r *Reconciler) allBackends(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.RedisBackendList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return out
}

// namespaceChanges passes what changes the namespaces a backend serves: a namespace
// created or deleted, or its labels changed.
func namespaceChanges() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: LabelsChanged().Update,
		// Created and deleted: the default true. Generic: none come.
	}
}

// LabelsChanged passes a namespace's label changes: what selection reads. Not its
// creation: a new namespace has no policy yet (the policy's creation syncs it), and every
// namespace the informer lists at start-up must not cost a sync.
func LabelsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc:  func(e event.UpdateEvent) bool { return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) },
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
