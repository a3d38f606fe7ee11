package tenancy

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/eventnote"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// Reconciler gives every namespace that has policies a Redis ACL user of its own,
// restricted to the namespace's keys and to what a sidecar runs, and publishes its
// credentials in the namespace as a basic-auth Secret (SecretName, the name sidecars mount).
// It rotates the password on request (AnnotationRotate) and every RotationPeriod without
// dropping a check: Redis accepts both passwords for Grace after the new one is published.
// Grace after the namespace's last policy is gone, it deletes the user from every node and
// the Secret. It is keyed by namespace (request name: SecretName).
type Reconciler struct {
	client.Client
	// APIReader reads the Secret uncached. Each step starts from what the API server holds:
	// a cached copy that does not show this controller's last rotation yet would set Redis
	// back to the previous password and lock out the sidecars that read the new one.
	APIReader client.Reader
	// Users keeps the users on every node of the default Redis.
	Users *redisacl.Users
	// Topology is the default Redis as sidecars reach it.
	Topology redisconn.Topology
	// Redises, when set, says which Redis serves each namespace (RedisBackends): its user
	// lives there, and is retired from the Redis it left. Nil: every namespace on the
	// default Redis.
	Redises Redises
	// Recorder emits events on the Secret (never its contents).
	Recorder events.EventRecorder
	// SecretName is the credentials Secret in each namespace.
	SecretName string
	// UserPrefix begins each user name: UserPrefix + namespace.
	UserPrefix string
	// KeyPrefix is the operator's key prefix; each user may touch "{KeyPrefix<namespace>/*".
	KeyPrefix string
	// AllowEvalSHA grants the users EVALSHA besides FCALL (redisacl.TenantCommands).
	AllowEvalSHA bool
	// RotationPeriod is the age at which a password is replaced; 0 never.
	RotationPeriod time.Duration
	// Grace is how long a replaced password stays valid, and how long the user outlives
	// the namespace's last policy: long enough for the kubelet to refresh mounted Secrets
	// and snapshots.
	Grace time.Duration
	// Unknown carries namespaces whose user the repair loop found in Redis unasked.
	Unknown chan event.GenericEvent
}

// Secrets: create cannot be limited to a name (the API server authorizes it before the
// object exists); everything else is limited to the credentials Secret's default name.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=ratelimit-redis-credentials,verbs=get;list;watch;update;delete

// Reconcile makes one namespace's user and Secret match whether it has policies.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Namespace
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list policies in %s: %w", ns, err)
	}
	s, err := r.secret(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() { tenantUsers.Set(float64(r.wanted())) }()
	if len(list.Items) == 0 {
		return r.remove(ctx, ns, s)
	}
	return r.ensure(ctx, ns, s)
}

// secret reads the namespace's credentials Secret from the API server; nil when absent.
func (r *Reconciler) secret(ctx context.Context, ns string) (*corev1.Secret, error) {
	var s corev1.Secret
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: r.SecretName}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get Secret %s/%s: %w", ns, r.SecretName, err)
	}
	return &s, nil
}

// user is the namespace's ACL user on place accepting the passwords hashed: the commands
// a sidecar of that Redis's topology sends.
func (r *Reconciler) user(place Place, ns string, hashes []string) (redisacl.User, error) {
	commands := redisacl.TenantCommands(place.Topology.Mode == redisconn.ModeCluster, place.Topology.DB, r.AllowEvalSHA)
	return redisacl.TenantUser(r.UserPrefix, r.KeyPrefix, ns, commands, hashes)
}

func (r *Reconciler) userName(ns string) string { return r.UserPrefix + ns }

// apply sets the namespace's user, accepting exactly hashes, on every node of place.
func (r *Reconciler) apply(ctx context.Context, place Place, ns string, hashes []string) error {
	users, err := place.users()
	if err != nil {
		return err
	}
	u, err := r.user(place, ns, hashes)
	if err != nil {
		return err
	}
	return users.Ensure(ctx, u)
}

// redisFailed reports that Redis did not take a change and retries after redisRetry (not
// the controller's growing backoff: an outage must not delay the namespace for minutes
// once Redis is back).
func (r *Reconciler) redisFailed(ctx context.Context, ns string, s *corev1.Secret, err error) (ctrl.Result, error) {
	tenantFailures.Inc()
	logf.FromContext(ctx).Info("redis user not updated on every node; will retry", "namespace", ns,
		"user", r.userName(ns), "error", err.Error())
	r.event(s, corev1.EventTypeWarning, "RedisUnavailable", "Redis user %s not updated on every node: %v", r.userName(ns), err)
	return ctrl.Result{RequeueAfter: redisRetry}, nil
}

// event records an event on the Secret, if there is one, its note kept to one line (an
// error from Redis or the API server is quoted in it as it came).
func (r *Reconciler) event(s *corev1.Secret, kind, reason, format string, args ...any) {
	if s != nil && r.Recorder != nil {
		r.Recorder.Eventf(s, nil, kind, reason, "ReconcileRedisUser", "%s", eventnote.OneLine(fmt.Sprintf(format, args...)))
	}
}

// SetupWithManager registers the controller: the credentials Secrets (a rotation request, a
// hand edit, a deletion), a namespace's first and last policy, and users the repair loop
// found in Redis unasked.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byName := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.SecretName })
	// Only a policy's arrival and final removal change whether a namespace needs a user.
	createOrDelete := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("tenant").
		For(&corev1.Secret{}, builder.WithPredicates(byName)).
		Watches(&v1alpha1.RateLimitPolicy{}, handler.EnqueueRequestsFromMapFunc(r.namespaceOf),
			builder.WithPredicates(createOrDelete)).
		WatchesRawSource(source.Channel(r.Unknown, handler.EnqueueRequestsFromMapFunc(r.namespaceOf)))
	if r.Redises != nil {
		// The Redis serving a namespace changes with its labels and with the RedisBackends:
		// its user follows.
		// Only relabelling: a namespace created has no policy yet (the policy's creation
		// brings it here), and every namespace the informer lists at start-up must not cost
		// a Secret read and a user deletion on every node.
		relabelled := predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
			},
			CreateFunc:  func(event.CreateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}
		b = b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceNamed), builder.OnlyMetadata,
			builder.WithPredicates(relabelled)).
			Watches(&v1alpha1.RedisBackend{}, handler.EnqueueRequestsFromMapFunc(r.withPolicies),
				builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}

// namespaceOf maps any object to its namespace's request.
func (r *Reconciler) namespaceOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{r.request(o.GetNamespace())}
}

// namespaceNamed maps a Namespace to its request.
func (r *Reconciler) namespaceNamed(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{r.request(o.GetName())}
}

// withPolicies maps any event to the request of every namespace with a policy.
func (r *Reconciler) withPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []reconcile.Request
	for i := range list.Items {
		if ns := list.Items[i].Namespace; !seen[ns] {
			seen[ns] = true
			out = append(out, r.request(ns))
		}
	}
	return out
}

func (r *Reconciler) request(ns string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: r.SecretName}}
}
