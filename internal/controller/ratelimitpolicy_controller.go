package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/eventnote"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Finalizer keeps a policy until it is out of its namespace's snapshot.
const Finalizer = "policy.ratelimit.dev/snapshot"

// RedisRetry is how long a policy waits to re-check scripts while Redis is unavailable.
const RedisRetry = 5 * time.Second

// PolicyReconciler turns a RateLimitPolicy into running state and reports it: compiled with
// the webhook's own rules, present in the namespace's snapshot (Published, and so Ready),
// scripts loaded on every primary (ScriptsLoaded), and whether Redis keeps its counters
// (CountersProtected); neither of the last two gates Ready. Writing the snapshot is the
// SnapshotReconciler's job (coalesced per namespace).
type PolicyReconciler struct {
	client.Client
	// Scripts keeps the Lua scripts loaded on the default Redis.
	Scripts *ScriptLoader
	// Redises says which Redis serves each namespace (RedisBackends): its scripts and its
	// memory monitor are the ones a policy reports. Nil: the default Redis (Scripts,
	// Memory) serves every namespace.
	Redises *Redises
	// Snapshots says what each namespace's snapshot holds (the snapshot controller
	// publishes it) and when that changes.
	Snapshots PublishedView
	// Recorder emits events on Ready transitions, and on ScriptsLoaded turning
	// RedisUnavailable and back.
	Recorder events.EventRecorder
	// Rules are the installation's validation settings (the key prefix), as the webhook's.
	Rules policy.Rules
	// Compiler compiles each policy once per generation (shared with the snapshot
	// controller); nil compiles with Rules every time.
	Compiler *Compiler
	// Gateways resolves targetRefs (required: without Gateway API served it finds none).
	Gateways *GatewayAPI
	// DataPlane keeps the gateways' SecurityPolicies and AuthorizationPolicies; nil for none.
	DataPlane *DataPlane
	// Memory assesses whether the default Redis keeps the counters (CountersProtected); nil
	// turns the condition off, for every Redis.
	Memory *redismemory.Monitor

	memoryChanged chan event.GenericEvent // the monitor's assessment changed
	ready         conditionTracker        // Ready; feeds ratelimit_policies{ready}
	scripts       conditionTracker        // ScriptsLoaded
	memory        conditionTracker        // CountersProtected
}

// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitpolicies,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitpolicies/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler: Get, finalizer, evaluate, deferred status patch.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
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
func (r *PolicyReconciler) evaluate(ctx context.Context, p *v1alpha1.RateLimitPolicy) ctrl.Result {
	p.Status.ObservedGeneration = p.Generation
	rt := r.route(ctx, p.Namespace)
	r.setCountersProtected(p, rt)
	compiled, errs := compileWith(r.Compiler, r.Rules)(p)
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
		res.RequeueAfter = RedisRetry
	} else {
		setCondition(p, v1alpha1.ConditionScriptsLoaded, true, v1alpha1.ReasonScriptsLoaded, "script "+s.Name+" is loaded on every Redis primary"+of(rt))
	}
	attached, err := r.publish(ctx, p, compiled)
	if err == nil {
		err = r.programDataPlane(ctx, p, attached)
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "attach to Gateway API targets")
		res.RequeueAfter = GatewayRetry
	}
	setReady(p)
	return res
}

// route is the Redis serving namespace ns: the default one without RedisBackends, and when
// the cache cannot say (a route without a connection, whose error says why).
func (r *PolicyReconciler) route(ctx context.Context, ns string) Route {
	if r.Redises == nil {
		return Route{Redis: &Redis{Scripts: r.Scripts, Memory: r.Memory}}
	}
	rt, err := r.Redises.Route(ctx, ns)
	if err != nil {
		return Route{Err: err}
	}
	return rt
}

// ensureScripts makes sure the scripts are loaded on the Redis of rt.
func (r *PolicyReconciler) ensureScripts(ctx context.Context, rt Route) error {
	if rt.Redis == nil {
		return rt.notConnected()
	}
	return rt.Redis.Scripts.Ensure(ctx)
}

// of is " of RedisBackend <name>" for a backend's Redis, "" for the default one.
func of(rt Route) string {
	if rt.Backend == backend.Default {
		return ""
	}
	return " of " + backend.Describe(rt.Backend)
}

// publish reports whether p's compiled entry is published. For a policy with targetRefs
// that entry is the one its targets give it (none: Published says why), and the resolved
// attachment is returned; an error leaves Published as it was, to be retried.
func (r *PolicyReconciler) publish(ctx context.Context, p *v1alpha1.RateLimitPolicy, compiled policy.Compiled) (*attachment.Result, error) {
	res, eff, ok, err := r.attach(ctx, p)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return res, nil
	case eff != p:
		compiled, _ = compileWith(r.Compiler, r.Rules)(eff) // compiles: only match.http differs from p, which did
	}
	r.setPublished(ctx, p, compiled.Entry)
	return res, nil
}

// setInvalid reports a policy that does not compile. When the published snapshot still
// carries its last valid version (the snapshot controller keeps it, so a bad edit never
// silently lifts a limit), the messages say so and status.snapshot keeps pointing at it.
func (r *PolicyReconciler) setInvalid(ctx context.Context, p *v1alpha1.RateLimitPolicy, msg string) {
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
func (r *PolicyReconciler) setPublished(ctx context.Context, p *v1alpha1.RateLimitPolicy, entry snapshot.Entry) {
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

// patchStatus writes the status if it changed, then emits an event when Ready flipped, when
// ScriptsLoaded turned RedisUnavailable or came back from it (Ready does not follow Redis,
// so this is the policy's only event about an outage), and when CountersProtected turned
// False (a Warning naming the finding), changed finding, or came back True. Events follow a successful
// write (a failed one is retried, and would announce twice) and are compared with what this
// process last wrote, not only with the cached object, which may not show that write yet.
func (r *PolicyReconciler) patchStatus(ctx context.Context, before, p *v1alpha1.RateLimitPolicy) error {
	if !equality.Semantic.DeepEqual(before.Status, p.Status) {
		if err := r.Status().Patch(ctx, p, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("patch status: %w", client.IgnoreNotFound(err))
		}
	}
	r.announce(before, p)
	return nil
}

// announce emits patchStatus's events for the transitions from before to p.
func (r *PolicyReconciler) announce(before, p *v1alpha1.RateLimitPolicy) {
	key := client.ObjectKeyFromObject(p)
	if was, now, ok := conditionPair(before, p, v1alpha1.ConditionReady); ok && r.ready.transition(key, p.UID, was, now) {
		r.event(p, now)
	}
	if was, now, ok := conditionPair(before, p, v1alpha1.ConditionScriptsLoaded); ok && r.scripts.transition(key, p.UID, was, now) &&
		(now.Reason == v1alpha1.ReasonRedisUnavailable || was != nil && was.Reason == v1alpha1.ReasonRedisUnavailable) {
		r.event(p, now)
	}
	if was, now, ok := conditionPair(before, p, v1alpha1.ConditionCountersProtected); ok && r.memory.transition(key, p.UID, was, now) &&
		(now.Status == metav1.ConditionFalse || was != nil && was.Status == metav1.ConditionFalse) && now.Status != metav1.ConditionUnknown {
		r.event(p, now)
	}
}

// conditionPair is a condition before and after a reconcile; ok is false when it is not set.
func conditionPair(before, p *v1alpha1.RateLimitPolicy, typ string) (was, now *metav1.Condition, ok bool) {
	now = meta.FindStatusCondition(p.Status.Conditions, typ)
	return meta.FindStatusCondition(before.Status.Conditions, typ), now, now != nil
}

// event reports a condition's new state on the policy. The condition's message may quote
// the policy's own text (a tier's CEL expression in a compile error, several lines long):
// the Event's note keeps it to one line, so that no author writes a line that passes for
// another Event.
func (r *PolicyReconciler) event(p *v1alpha1.RateLimitPolicy, c *metav1.Condition) {
	if r.Recorder == nil {
		return
	}
	kind := corev1.EventTypeNormal
	if problemReasons[c.Reason] {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(p, nil, kind, c.Reason, "Reconcile", "%s", eventnote.OneLine(c.Message))
}

// forget drops a policy that is gone from the trackers.
func (r *PolicyReconciler) forget(key types.NamespacedName) {
	r.ready.forget(key)
	r.scripts.forget(key)
	r.memory.forget(key)
	if r.Compiler != nil {
		r.Compiler.Forget(key)
	}
}

// problemReasons are the reasons worth a Warning event; the others (PublishPending, seen by
// every new or changed policy for a moment, and the recoveries) are Normal.
var problemReasons = map[string]bool{
	v1alpha1.ReasonInvalidPolicy: true, v1alpha1.ReasonRedisUnavailable: true, v1alpha1.ReasonSnapshotTooLarge: true,
	v1alpha1.ReasonCountersEvictable: true, v1alpha1.ReasonMemoryUnbounded: true, v1alpha1.ReasonClientMemoryUnbounded: true,
	v1alpha1.ReasonRepliesUnbounded: true, v1alpha1.ReasonValuesUnbounded: true, v1alpha1.ReasonForeignKeys: true,
}

// finalize lets a deleted policy go once its namespace's published snapshot no longer
// carries it. The snapshot controller is the only writer of snapshots: the deletion enqueued
// the namespace there, and its Changed event brings the policy back here. (Syncing here as
// well raced that controller's writes: conflicts, or a stale list written over a newer one.)
func (r *PolicyReconciler) finalize(ctx context.Context, p *v1alpha1.RateLimitPolicy) error {
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

// SetupWithManager registers the controller: policy spec changes and deletions, changes of
// what a namespace's snapshot holds (to report Published), and script-state changes.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RateLimitPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Snapshots.Changed(), handler.EnqueueRequestsFromMapFunc(r.policiesIn))).
		WatchesRawSource(source.Channel(r.Scripts.Changed(), handler.EnqueueRequestsFromMapFunc(r.allPolicies))).
		// Policies are independent; 4 workers shorten a bulk apply's time to Ready
		// (docs/benchmarks.md, "Measurements behind the defaults").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	if r.memoryChanged != nil {
		b = b.WatchesRawSource(source.Channel(r.memoryChanged, handler.EnqueueRequestsFromMapFunc(r.allPolicies)))
	}
	if r.Redises.enabled() {
		// A backend's scripts or memory changed, or it connected or went.
		b = b.WatchesRawSource(source.Channel(r.Redises.policies, handler.EnqueueRequestsFromMapFunc(r.allPolicies)))
	}
	return r.watchAttachments(b).Complete(r)
}

// watchAttachments re-evaluates attached policies when what they attach to changes: a
// route or Gateway (their namespaces' policies), or another policy of the namespace (a
// conflict won or given up).
func (r *PolicyReconciler) watchAttachments(b *builder.TypedBuilder[reconcile.Request]) *builder.TypedBuilder[reconcile.Request] {
	inNamespaces := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		for _, ns := range r.Gateways.routeNamespaces(ctx, o) {
			out = append(out, r.attachedIn(ctx, ns, "")...)
		}
		return out
	})
	for _, o := range r.Gateways.watched() { // none without Gateway API
		b = b.Watches(o, inNamespaces, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Watches(&v1alpha1.RateLimitPolicy{}, handler.EnqueueRequestsFromMapFunc(r.attachedPeers),
		builder.WithPredicates(predicate.GenerationChangedPredicate{}))
}

// attachedPeers maps a policy event to the other policies of its namespace with targetRefs.
func (r *PolicyReconciler) attachedPeers(ctx context.Context, o client.Object) []reconcile.Request {
	return r.attachedIn(ctx, o.GetNamespace(), o.GetName())
}

// attachedIn are the policies of ns with targetRefs, but the one named except.
func (r *PolicyReconciler) attachedIn(ctx context.Context, ns, except string) []reconcile.Request {
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
func (r *PolicyReconciler) policiesIn(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requests(ctx, client.InNamespace(o.GetNamespace()))
}

// allPolicies maps a script-state change to every policy.
func (r *PolicyReconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.requests(ctx)
}

func (r *PolicyReconciler) requests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
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
