package publishing

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/gatewayapi"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Reconciler publishes each namespace's snapshot ConfigMap. It is keyed by
// namespace, not by policy: policy events are added to its queue after CoalesceDelay, and
// the queue holds each namespace once, so a burst of changes costs one write per round, not
// one per policy.
type Reconciler struct {
	client.Client
	// Redis is the default Redis's topology published to sidecars (never credentials), and
	// whether the scripts are functions (for every Redis).
	Redis snapshot.Redis
	// Redises, when set, says which Redis serves each namespace (RedisBackends): its
	// topology is published instead, and a namespace that moved is told on each policy.
	Redises *redisbackend.Redises
	// Recorder emits the RedisChanged event on the policies of a namespace that moved.
	Recorder events.EventRecorder
	// Rules are the installation's validation settings (the key prefix), as the webhook's.
	Rules policy.Rules
	// CoalesceDelay is how long policy events wait to be merged. Default 250ms.
	CoalesceDelay time.Duration
	// Gateways resolves policies with targetRefs to what they govern; nil publishes none.
	Gateways *gatewayapi.Reader
	// Compiler compiles each policy once per generation (shared with the policy
	// controller); nil compiles with Rules on every sync.
	Compiler *Compiler
	// Publications records what each sync published, for the policy controller to read;
	// nil records nothing.
	Publications *Publications
	// Overrides says the API server serves RateLimitOverride: without it (a Helm upgrade
	// that left the CRDs as they were) overrides are neither watched nor listed, and the
	// policies are published as before.
	Overrides bool
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitoverrides,verbs=get;list;watch

// Reconcile rebuilds one namespace's snapshot and writes it if it changed, and comes back
// when an override in it expires.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	next, err := r.sync(ctx, req.Namespace)
	if err != nil || next.IsZero() {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(time.Until(next), time.Millisecond)}, nil
}

// Sync builds the namespace's snapshot from its policies and overrides and makes the
// ConfigMap match: created, updated, or deleted when no valid policy is left.
func (r *Reconciler) Sync(ctx context.Context, ns string) error {
	_, err := r.sync(ctx, ns)
	return err
}

// sync is Sync, returning the earliest expiry of a published override (zero: none).
func (r *Reconciler) sync(ctx context.Context, ns string) (time.Time, error) {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return time.Time{}, fmt.Errorf("list policies in %s: %w", ns, err)
	}
	var ovs v1alpha1.RateLimitOverrideList
	if r.Overrides {
		if err := r.List(ctx, &ovs, client.InNamespace(ns)); err != nil {
			return time.Time{}, fmt.Errorf("list overrides in %s: %w", ns, err)
		}
	}
	items, err := r.effective(ctx, ns, list.Items)
	if err != nil {
		return time.Time{}, err
	}
	where, redis, err := r.redisOf(ctx, ns)
	if err != nil {
		return time.Time{}, err
	}
	snap, owners, err := snapshotOver(CompileWith(r.Compiler, r.Rules), r.Rules.Prefix(), ns, redis, items, r.lastPublished(ctx, ns))
	if err != nil {
		return time.Time{}, err
	}
	verdicts, next, err := AttachOverrides(snap, ovs.Items, time.Now())
	if err != nil {
		return time.Time{}, err
	}
	if len(snap.Policies) == 0 {
		r.Publications.record(ctx, ns, publishedState{overrides: verdicts})
		return time.Time{}, r.remove(ctx, ns)
	}
	data, err := snap.Marshal()
	if err != nil {
		return time.Time{}, err
	}
	// The object also carries one owner reference per policy; count them against the budget
	// so an oversized ConfigMap is reported, not refused by the API server in a write loop.
	if size := len(data) + ownerRefBytes*len(owners); size > snapshot.MaxBytes {
		r.Publications.record(ctx, ns, publishedState{problem: fmt.Sprintf("the snapshot of %d policies and %d overrides is %d bytes with its owner references, over the %d-byte ConfigMap budget: split policies across namespaces or shorten them", len(snap.Policies), len(verdicts), size, snapshot.MaxBytes)})
		return time.Time{}, nil
	}
	now := redisPlace{backend: where, redis: snap.Redis}
	was, err := r.write(ctx, ns, published{data: data, version: snap.Version, owners: owners, place: now})
	if err != nil {
		return time.Time{}, err
	}
	if was != nil && was.differs(now) {
		r.announceMove(ctx, ns, list.Items, *was, now)
	}
	snapshotBytes.WithLabelValues(ns).Set(float64(len(data)))
	st := stateOf(snap)
	st.overrides = verdicts
	r.Publications.record(ctx, ns, st)
	return next, nil
}

// effective is the namespace's policies as the sidecars run them: a policy with targetRefs
// carries the matches its targets give it, and is left out when they give it none.
func (r *Reconciler) effective(ctx context.Context, ns string, items []v1alpha1.RateLimitPolicy) ([]v1alpha1.RateLimitPolicy, error) {
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
