package ratelimitpolicy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/gatewayapi"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/publishing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Finalizer keeps a policy until it is out of its namespace's snapshot.
const Finalizer = "policy.ratelimit.dev/snapshot"

// Reconciler turns a RateLimitPolicy into running state and reports it: compiled with
// the webhook's own rules, present in the namespace's snapshot (Published, and so Ready),
// scripts loaded on every primary (ScriptsLoaded), and whether Redis keeps its counters
// (CountersProtected); neither of the last two gates Ready. Writing the snapshot is the
// snapshot publisher's job (publishing.Reconciler, coalesced per namespace).
type Reconciler struct {
	client.Client
	// Scripts keeps the Lua scripts loaded on the default Redis.
	Scripts redisbackend.Scripts
	// Redises says which Redis serves each namespace (RedisBackends): its scripts and its
	// memory monitor are the ones a policy reports. Nil: the default Redis (Scripts,
	// Memory) serves every namespace.
	Redises *redisbackend.Redises
	// Snapshots says what each namespace's snapshot holds (the snapshot controller
	// publishes it) and when that changes.
	Snapshots publishing.PublishedView
	// Recorder emits events on Ready transitions, and on ScriptsLoaded turning
	// RedisUnavailable and back.
	Recorder events.EventRecorder
	// Rules are the installation's validation settings (the key prefix), as the webhook's.
	Rules policy.Rules
	// Compiler compiles each policy once per generation (shared with the snapshot
	// controller); nil compiles with Rules every time.
	Compiler *publishing.Compiler
	// Gateways resolves targetRefs (required: without Gateway API served it finds none).
	Gateways *gatewayapi.Reader
	// DataPlane keeps the gateways' SecurityPolicies and AuthorizationPolicies; nil for none.
	DataPlane *gatewayapi.DataPlane
	// Memory assesses whether the default Redis keeps the counters (CountersProtected); nil
	// turns the condition off, for every Redis.
	Memory *redismemory.Monitor
	// MemoryChanged tells when Memory's assessment changed (redisbackend.SetupMemory): every
	// policy is evaluated again. Nil: never.
	MemoryChanged <-chan event.GenericEvent

	ready   conditionTracker // Ready; feeds ratelimit_policies{ready} once SetupWithManager ran
	scripts conditionTracker // ScriptsLoaded
	memory  conditionTracker // CountersProtected
}

// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitpolicies,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitpolicies/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler: Get, finalizer, evaluate, deferred status patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	var p v1alpha1.RateLimitPolicy
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &p)
	}
	if controllerutil.AddFinalizer(&p, Finalizer) {
		if err := r.Update(ctx, &p); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	before := p.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, &p); err != nil && retErr == nil {
			retErr = err
		}
	}()
	return r.evaluate(ctx, &p), nil
}

// evaluate sets every condition and says when to look again.
func (r *Reconciler) evaluate(ctx context.Context, p *v1alpha1.RateLimitPolicy) ctrl.Result {
	p.Status.ObservedGeneration = p.Generation
	rt := r.route(ctx, p.Namespace)
	r.setCountersProtected(p, rt)
	compiled, errs := publishing.CompileWith(r.Compiler, r.Rules)(p)
	if len(errs) > 0 {
		r.setInvalid(ctx, p, errs.ToAggregate().Error())
		r.invalidAncestors(ctx, p, errs.ToAggregate().Error())
		return ctrl.Result{}
	}
	s, err := limiter.ScriptFor(limiter.Algorithm(compiled.Entry.Algorithm))
	if err != nil { // Compile refused an unknown algorithm already
		r.setInvalid(ctx, p, err.Error())
		return ctrl.Result{}
	}
	p.Status.Scripts = []v1alpha1.ScriptStatus{{Name: s.Name, SHA: s.SHA}}
	res := ctrl.Result{}
	if err := r.ensureScripts(ctx, rt); err != nil {
		setCondition(p, v1alpha1.ConditionScriptsLoaded, false, v1alpha1.ReasonRedisUnavailable, err.Error())
		res.RequeueAfter = redisbackend.Retry
	} else {
		setCondition(p, v1alpha1.ConditionScriptsLoaded, true, v1alpha1.ReasonScriptsLoaded, "script "+s.Name+" is loaded on every Redis primary"+of(rt))
	}
	attached, err := r.publish(ctx, p, compiled)
	if err == nil {
		err = r.programDataPlane(ctx, p, attached)
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "attach to Gateway API targets")
		res.RequeueAfter = gatewayapi.Retry
	}
	setReady(p)
	return res
}

// route is the Redis serving namespace ns: the default one without RedisBackends, and when
// the cache cannot say (a route without a connection, whose error says why).
func (r *Reconciler) route(ctx context.Context, ns string) redisbackend.Route {
	if r.Redises == nil {
		return redisbackend.Route{Redis: &redisbackend.Redis{Scripts: r.Scripts, Memory: r.Memory}}
	}
	rt, err := r.Redises.Route(ctx, ns)
	if err != nil {
		return redisbackend.Route{Err: err}
	}
	return rt
}

// ensureScripts makes sure the scripts are loaded on the Redis of rt.
func (r *Reconciler) ensureScripts(ctx context.Context, rt redisbackend.Route) error {
	if rt.Redis == nil {
		return rt.NotConnected()
	}
	return rt.Redis.Scripts.Ensure(ctx)
}

// of is " of RedisBackend <name>" for a backend's Redis, "" for the default one.
func of(rt redisbackend.Route) string {
	if rt.Backend == backend.Default {
		return ""
	}
	return " of " + backend.Describe(rt.Backend)
}

// publish reports whether p's compiled entry is published. For a policy with targetRefs
// that entry is the one its targets give it (none: Published says why), and the resolved
// attachment is returned; an error leaves Published as it was, to be retried.
func (r *Reconciler) publish(ctx context.Context, p *v1alpha1.RateLimitPolicy, compiled policy.Compiled) (*attachment.Result, error) {
	res, eff, ok, err := r.attach(ctx, p)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return res, nil
	case eff != p:
		compiled, _ = publishing.CompileWith(r.Compiler, r.Rules)(eff) // compiles: only match.http differs from p, which did
	}
	r.setPublished(ctx, p, compiled.Entry)
	return res, nil
}

// setInvalid reports a policy that does not compile. When the published snapshot still
// carries its last valid version (the snapshot controller keeps it, so a bad edit never
// silently lifts a limit), the messages say so and status.snapshot keeps pointing at it.
func (r *Reconciler) setInvalid(ctx context.Context, p *v1alpha1.RateLimitPolicy, msg string) {
	p.Status.Scripts, p.Status.Snapshot = nil, nil
	if version, ok := r.Snapshots.Retains(ctx, p.Namespace, p.Name); ok {
		msg += "; its last valid version stays enforced (snapshot " + version + ") until the spec is fixed"
		p.Status.Snapshot = &v1alpha1.SnapshotReference{Name: snapshot.ConfigMapName, Version: version}
	}
	setCondition(p, v1alpha1.ConditionPublished, false, v1alpha1.ReasonInvalidPolicy, msg)
	setCondition(p, v1alpha1.ConditionScriptsLoaded, false, v1alpha1.ReasonInvalidPolicy, "the policy does not compile")
	setReady(p)
}

// setPublished reports whether the policy's compiled entry is in the published snapshot.
func (r *Reconciler) setPublished(ctx context.Context, p *v1alpha1.RateLimitPolicy, entry snapshot.Entry) {
	version, ok, problem := r.Snapshots.Published(ctx, p.Namespace, entry)
	switch {
	case ok:
		p.Status.Snapshot = &v1alpha1.SnapshotReference{Name: snapshot.ConfigMapName, Version: version}
		setCondition(p, v1alpha1.ConditionPublished, true, v1alpha1.ReasonPublished, "in snapshot "+snapshot.ConfigMapName+" version "+version)
	case problem != "":
		setCondition(p, v1alpha1.ConditionPublished, false, v1alpha1.ReasonSnapshotTooLarge, problem)
	default:
		setCondition(p, v1alpha1.ConditionPublished, false, v1alpha1.ReasonPending, "waiting for the namespace's snapshot to be written")
	}
}

// forget drops a policy that is gone from the trackers.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.ready.forget(key)
	r.scripts.forget(key)
	r.memory.forget(key)
	if r.Compiler != nil {
		r.Compiler.Forget(key)
	}
}

// finalize lets a deleted policy go once its namespace's published snapshot no longer
// carries it. The snapshot controller is the only writer of snapshots: the deletion enqueued
// the namespace there, and its Changed event brings the policy back here. (Syncing here as
// well raced that controller's writes: conflicts, or a stale list written over a newer one.)
func (r *Reconciler) finalize(ctx context.Context, p *v1alpha1.RateLimitPolicy) error {
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	if r.Snapshots.Holds(ctx, p.Namespace, p.Name) {
		return nil
	}
	if err := r.DataPlane.Remove(ctx, p); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(p, Finalizer)
	if err := client.IgnoreNotFound(r.Update(ctx, p)); err != nil {
		return fmt.Errorf("remove finalizer: %w", err) // gone already: nothing left to do
	}
	r.forget(client.ObjectKeyFromObject(p))
	return nil
}
