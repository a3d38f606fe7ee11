package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// SnapshotReconciler publishes each namespace's snapshot ConfigMap. It is keyed by
// namespace, not by policy: policy events are added to its queue after CoalesceDelay, and
// the queue holds each namespace once, so a burst of changes costs one write per round, not
// one per policy.
type SnapshotReconciler struct {
	client.Client
	// Redis is the topology published to sidecars (never credentials).
	Redis snapshot.Redis
	// Rules are the installation's validation settings (the key prefix), as the webhook's.
	Rules policy.Rules
	// CoalesceDelay is how long policy events wait to be merged. Default 250ms.
	CoalesceDelay time.Duration
	// Gateways resolves policies with targetRefs to what they govern; nil publishes none.
	Gateways *GatewayAPI
	// Compiler compiles each policy once per generation (shared with the policy
	// controller); nil compiles with Rules on every sync.
	Compiler *Compiler

	mu        sync.Mutex
	published map[string]publishedState // by namespace
	changed   chan event.GenericEvent
}

// Changed delivers an event (its object names the namespace) whenever what is published in
// a namespace changes, so the policy controller can report Published.
func (r *SnapshotReconciler) Changed() chan event.GenericEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan event.GenericEvent, 1024)
	}
	return r.changed
}

// publishedState is what the last write or read of a namespace's ConfigMap holds.
type publishedState struct {
	version  string
	policies map[string][32]byte // policy name -> hash of its compiled entry
	problem  string              // why nothing could be published, e.g. too large
	seeded   bool                // read from the ConfigMap, not yet recorded by a sync
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete

// Reconcile rebuilds one namespace's snapshot and writes it if it changed.
func (r *SnapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, r.Sync(ctx, req.Namespace)
}

// Sync builds the namespace's snapshot from its policies and makes the ConfigMap match:
// created, updated, or deleted when no valid policy is left.
func (r *SnapshotReconciler) Sync(ctx context.Context, ns string) error {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("list policies in %s: %w", ns, err)
	}
	items, err := r.effective(ctx, ns, list.Items)
	if err != nil {
		return err
	}
	snap, owners, err := buildOver(buildWith(r.Compiler, r.Rules), r.Rules.Prefix(), ns, r.Redis, items, r.lastPublished(ctx, ns))
	if err != nil {
		return err
	}
	if len(snap.Policies) == 0 {
		return r.remove(ctx, ns)
	}
	data, err := snap.Marshal()
	if err != nil {
		return err
	}
	// The object also carries one owner reference per policy; count them against the budget
	// so an oversized ConfigMap is reported, not refused by the API server in a write loop.
	if size := len(data) + ownerRefBytes*len(owners); size > snapshot.MaxBytes {
		r.record(ctx, ns, publishedState{problem: fmt.Sprintf("the snapshot of %d policies is %d bytes with its owner references, over the %d-byte ConfigMap budget: split policies across namespaces or shorten them", len(snap.Policies), size, snapshot.MaxBytes)})
		return nil
	}
	if err := r.write(ctx, ns, data, snap.Version, owners); err != nil {
		return err
	}
	snapshotBytes.WithLabelValues(ns).Set(float64(len(data)))
	r.record(ctx, ns, stateOf(snap))
	return nil
}

// effective is the namespace's policies as the sidecars run them: a policy with targetRefs
// carries the matches its targets give it, and is left out when they give it none.
func (r *SnapshotReconciler) effective(ctx context.Context, ns string, items []v1alpha1.RateLimitPolicy) ([]v1alpha1.RateLimitPolicy, error) {
	var results map[string]*attachment.Result
	if r.Gateways != nil {
		var err error
		if results, err = r.Gateways.Resolve(ctx, ns, items); err != nil {
			return nil, err
		}
	}
	return attachment.EffectiveAll(items, results), nil
}

// ownerRefBytes is a generous size of one serialized owner reference.
const ownerRefBytes = 200

// Published is what a namespace's snapshot ConfigMap holds: the document and the policies
// that own it. The zero value is nothing published.
type Published struct {
	// Snapshot is the published document, nil when there is none (or it cannot be read).
	Snapshot *snapshot.Snapshot
	// Owners are the ConfigMap's owner references, one per policy it carries.
	Owners []metav1.OwnerReference
}

// entry is the published entry of the policy named name with uid, if any.
func (p Published) entry(name string, uid types.UID) (snapshot.Entry, bool) {
	if p.Snapshot == nil || !slices.ContainsFunc(p.Owners, func(o metav1.OwnerReference) bool { return o.Name == name && o.UID == uid }) {
		return snapshot.Entry{}, false
	}
	i := slices.IndexFunc(p.Snapshot.Policies, func(e snapshot.Entry) bool { return e.Name == name })
	if i < 0 {
		return snapshot.Entry{}, false
	}
	return p.Snapshot.Policies[i], true
}

// Build compiles a namespace's policies (defaulted in memory, so policies stored without the
// webhook still work) into a sealed snapshot, skipping invalid and deleting ones, and returns
// the owner references of the policies it holds.
func Build(ns string, redis snapshot.Redis, items []v1alpha1.RateLimitPolicy) (*snapshot.Snapshot, []metav1.OwnerReference, error) {
	return BuildOver(policy.Rules{}, ns, redis, items, Published{})
}

// BuildOver is Build over what is published: a policy that no longer compiles (an edit
// that bypassed the webhook, or a rule added by an upgrade) keeps the entry last published
// for it, so a bad edit never silently removes a limit that was enforced; its status says
// it is invalid and that its last valid version stays in force.
func BuildOver(rules policy.Rules, ns string, redis snapshot.Redis, items []v1alpha1.RateLimitPolicy, last Published) (*snapshot.Snapshot, []metav1.OwnerReference, error) {
	return buildOver(rules.Build, rules.Prefix(), ns, redis, items, last)
}

// buildFunc compiles a policy: policy.Rules.Build, or a Compiler's cached Build.
type buildFunc func(*v1alpha1.RateLimitPolicy) (policy.Compiled, field.ErrorList)

// buildWith is c's Build, or rules' when there is no c.
func buildWith(c *Compiler, rules policy.Rules) buildFunc {
	if c == nil {
		return rules.Build
	}
	return c.Build
}

// buildOver is BuildOver with build compiling each policy, under the key prefix prefix.
func buildOver(build buildFunc, prefix, ns string, redis snapshot.Redis, items []v1alpha1.RateLimitPolicy, last Published) (*snapshot.Snapshot, []metav1.OwnerReference, error) {
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	snap := &snapshot.Snapshot{Namespace: ns, KeyPrefix: prefix, Redis: redis, Scripts: []snapshot.Script{},
		Policies: []snapshot.Entry{}}
	var owners []metav1.OwnerReference
	scripts := map[string]string{}
	for i := range items {
		if !items[i].DeletionTimestamp.IsZero() {
			continue
		}
		entry, ok := buildEntry(build, prefix, ns, &items[i], last)
		if !ok {
			continue
		}
		snap.Policies = append(snap.Policies, entry)
		scripts[entry.Script] = entry.SHA
		owners = append(owners, metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(),
			Kind: "RateLimitPolicy", Name: items[i].Name, UID: items[i].UID})
	}
	for name, sha := range scripts {
		snap.Scripts = append(snap.Scripts, snapshot.Script{Name: name, SHA: sha})
	}
	sort.Slice(snap.Scripts, func(i, j int) bool { return snap.Scripts[i].Name < snap.Scripts[j].Name })
	if err := snap.Seal(); err != nil {
		return nil, nil, err
	}
	return snap, owners, nil
}

// buildEntry is the snapshot entry of item: compiled, or, when it does not compile, the
// entry last published for it, if that one still holds under the key prefix (ok false
// otherwise: a policy that breaks the key scope, say, loses its entry rather than keep keys
// outside it).
func buildEntry(build buildFunc, prefix, ns string, item *v1alpha1.RateLimitPolicy, last Published) (snapshot.Entry, bool) {
	compiled, errs := build(item)
	if len(errs) == 0 {
		return compiled.Entry, true
	}
	kept, ok := last.entry(item.Name, item.UID)
	if !ok || kept.InScope(prefix) != nil {
		return snapshot.Entry{}, false
	}
	if _, err := limiterspec.Compile(ns, kept, false); err != nil {
		return snapshot.Entry{}, false
	}
	return kept, true
}

// lastPublished reads the namespace's ConfigMap; nothing when it is absent, unreadable or
// not a valid document (then an invalid policy has no last version to keep).
func (r *SnapshotReconciler) lastPublished(ctx context.Context, ns string) Published {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}, &cm); err != nil {
		return Published{}
	}
	s, err := snapshot.Parse([]byte(cm.Data[snapshot.DataKey]))
	if err != nil {
		return Published{}
	}
	return Published{Snapshot: s, Owners: cm.OwnerReferences}
}

// write creates or updates the ConfigMap when its data, labels or owners differ.
func (r *SnapshotReconciler) write(ctx context.Context, ns string, data []byte, version string, owners []metav1.OwnerReference) error {
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}
	err := r.Get(ctx, key, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}
		fill(&cm, data, version, owners)
		if err := r.Create(ctx, &cm); err != nil {
			return fmt.Errorf("create snapshot %s: %w", key, err)
		}
		snapshotWrites.WithLabelValues("create").Inc()
		logf.FromContext(ctx).Info("published snapshot", "namespace", ns, "version", version, "bytes", len(data))
		return nil
	case err != nil:
		return fmt.Errorf("get snapshot %s: %w", key, err)
	}
	want := cm.DeepCopy()
	fill(want, data, version, owners)
	if equalConfigMaps(&cm, want) {
		return nil
	}
	if err := r.Update(ctx, want); err != nil {
		return fmt.Errorf("update snapshot %s: %w", key, err)
	}
	snapshotWrites.WithLabelValues("update").Inc()
	logf.FromContext(ctx).Info("published snapshot", "namespace", ns, "version", version, "bytes", len(data))
	return nil
}

func fill(cm *corev1.ConfigMap, data []byte, version string, owners []metav1.OwnerReference) {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[snapshot.LabelSnapshot] = "true"
	cm.Labels["app.kubernetes.io/managed-by"] = "ratelimit-operator"
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[snapshot.AnnotationVersion] = version
	cm.Data = map[string]string{snapshot.DataKey: string(data)}
	cm.BinaryData = nil
	cm.OwnerReferences = owners
}

func equalConfigMaps(a, b *corev1.ConfigMap) bool {
	return a.Data[snapshot.DataKey] == b.Data[snapshot.DataKey] && len(a.Data) == len(b.Data) &&
		len(a.BinaryData) == 0 && a.Labels[snapshot.LabelSnapshot] == "true" &&
		a.Labels["app.kubernetes.io/managed-by"] == "ratelimit-operator" &&
		a.Annotations[snapshot.AnnotationVersion] == b.Annotations[snapshot.AnnotationVersion] &&
		slices.EqualFunc(a.OwnerReferences, b.OwnerReferences, func(x, y metav1.OwnerReference) bool {
			return x.UID == y.UID && x.Name == y.Name
		})
}

// remove deletes the ConfigMap of a namespace without valid policies.
func (r *SnapshotReconciler) remove(ctx context.Context, ns string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}
	err := r.Delete(ctx, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete snapshot %s/%s: %w", ns, snapshot.ConfigMapName, err)
	}
	if err == nil {
		snapshotWrites.WithLabelValues("delete").Inc()
		logf.FromContext(ctx).Info("removed snapshot: no policies left", "namespace", ns)
	}
	snapshotBytes.DeleteLabelValues(ns)
	r.record(ctx, ns, publishedState{})
	return nil
}

func stateOf(s *snapshot.Snapshot) publishedState {
	st := publishedState{version: s.Version, policies: make(map[string][32]byte, len(s.Policies))}
	for _, p := range s.Policies {
		st.policies[p.Name] = entryHash(p)
	}
	return st
}

func entryHash(p snapshot.Entry) [32]byte {
	b, _ := json.Marshal(p) //nolint:errchkjson // plain data, cannot fail
	return sha256.Sum256(b)
}

// record stores what is published in ns and, when it changed, tells the policy controller.
// The send gives up when ctx ends: after shutdown nobody reads the channel.
func (r *SnapshotReconciler) record(ctx context.Context, ns string, st publishedState) {
	ch := r.Changed()
	r.mu.Lock()
	if r.published == nil {
		r.published = map[string]publishedState{}
	}
	old, seen := r.published[ns]
	r.published[ns] = st
	r.mu.Unlock()
	// The first sync after a seed always tells: policies evaluated while the state was not
	// known yet (an edited ConfigMap) wait for it.
	if seen && !old.seeded && old.version == st.version && old.problem == st.problem {
		return
	}
	select {
	case ch <- event.GenericEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}}:
	case <-ctx.Done():
	}
}

// state is what is published in ns: what this process last wrote or, before its first sync
// of the namespace, what the ConfigMap already holds. Without the read, a restarted
// controller would report every policy PublishPending (Ready flapping, two events per
// policy) until its first sync. ok is false when that is not known yet (the ConfigMap cannot
// be read or was edited); the namespace's next sync records it.
func (r *SnapshotReconciler) state(ctx context.Context, ns string) (publishedState, bool) {
	r.mu.Lock()
	st, ok := r.published[ns]
	r.mu.Unlock()
	if ok {
		return st, true
	}
	st, err := r.read(ctx, ns)
	if err != nil {
		logf.FromContext(ctx).V(1).Info("published snapshot not known yet", "namespace", ns, "reason", err.Error())
		return publishedState{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.published == nil {
		r.published = map[string]publishedState{}
	}
	if cur, ok := r.published[ns]; ok { // a sync recorded it meanwhile: it is newer
		return cur, true
	}
	st.seeded = true
	r.published[ns] = st
	return st, true
}

// read is what the namespace's ConfigMap holds: nothing when there is none.
func (r *SnapshotReconciler) read(ctx context.Context, ns string) (publishedState, error) {
	var cm corev1.ConfigMap
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		return publishedState{}, nil
	}
	if err != nil {
		return publishedState{}, fmt.Errorf("get snapshot: %w", err)
	}
	s, err := snapshot.Parse([]byte(cm.Data[snapshot.DataKey]))
	if err != nil {
		return publishedState{}, err
	}
	return stateOf(s), nil
}

// Published reports whether entry is in the namespace's published snapshot, with the
// snapshot's version, or why nothing could be published.
func (r *SnapshotReconciler) Published(ctx context.Context, ns string, entry snapshot.Entry) (version string, ok bool, problem string) {
	st, _ := r.state(ctx, ns)
	h, found := st.policies[entry.Name]
	return st.version, found && h == entryHash(entry), st.problem
}

// Retains reports whether the namespace's published snapshot is known to carry an entry
// for the named policy, with that snapshot's version.
func (r *SnapshotReconciler) Retains(ctx context.Context, ns, name string) (string, bool) {
	st, known := r.state(ctx, ns)
	_, found := st.policies[name]
	return st.version, known && found
}

// Holds reports whether the namespace's published snapshot may still carry the named
// policy: true while that is not known.
func (r *SnapshotReconciler) Holds(ctx context.Context, ns, name string) bool {
	st, known := r.state(ctx, ns)
	_, found := st.policies[name]
	return found || !known
}

// SetupWithManager registers the controller: policy spec changes and deletions, and any
// change to a snapshot ConfigMap (a hand edit or delete is repaired), enqueue the namespace.
func (r *SnapshotReconciler) SetupWithManager(mgr ctrl.Manager) error {
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
	if r.Gateways != nil {
		// A route or Gateway change moves what the namespace's attached policies govern.
		toNamespaces := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return namespaceRequests(r.Gateways.routeNamespaces(ctx, o))
		})
		for _, o := range r.Gateways.watched() {
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
