package publishing

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// lastPublished reads the namespace's ConfigMap; nothing when it is absent, unreadable or
// not a valid document (then an invalid policy has no last version to keep).
func (r *Reconciler) lastPublished(ctx context.Context, ns string) Published {
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

// AnnotationBackend on a snapshot ConfigMap names the RedisBackend whose Redis the
// snapshot names; absent for the manager's default Redis. It tells a later sync that the
// namespace moved, and from where.
const AnnotationBackend = "policy.ratelimit.dev/redis-backend"

// published is what a snapshot ConfigMap is written to hold.
type published struct {
	data    []byte
	version string
	owners  []metav1.OwnerReference
	place   redisPlace
}

// redisPlace is where a snapshot says a namespace's counters live: which Redis, and how
// sidecars reach it.
type redisPlace struct {
	backend string // the RedisBackend serving the namespace; "" the default Redis
	redis   snapshot.Redis
}

// differs reports whether a and b are different Redises: another backend, or the same one
// pointed elsewhere.
func (a redisPlace) differs(b redisPlace) bool {
	return a.backend != b.backend || a.redis.Mode != b.redis.Mode || !slices.Equal(a.redis.Addrs, b.redis.Addrs) ||
		a.redis.MasterName != b.redis.MasterName || a.redis.DB != b.redis.DB
}

// String names the place for people: the Redis and its addresses.
func (a redisPlace) String() string {
	return backend.Describe(a.backend) + " (" + strings.Join(a.redis.Addrs, ", ") + ")"
}

// write creates or updates the ConfigMap when its data, labels, owners or backend differ.
// When it updated one, was is the place the ConfigMap named before (nil when it could not
// be read).
func (r *Reconciler) write(ctx context.Context, ns string, p published) (was *redisPlace, err error) {
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}
	err = r.Get(ctx, key, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}
		fill(&cm, p)
		if err := r.Create(ctx, &cm); err != nil {
			return nil, fmt.Errorf("create snapshot %s: %w", key, err)
		}
		snapshotWrites.WithLabelValues("create").Inc()
		logf.FromContext(ctx).Info("published snapshot", "namespace", ns, "version", p.version, "bytes", len(p.data),
			"redis", p.place.String())
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get snapshot %s: %w", key, err)
	}
	want := cm.DeepCopy()
	fill(want, p)
	if equalConfigMaps(&cm, want) {
		return nil, nil
	}
	if err := r.Update(ctx, want); err != nil {
		return nil, fmt.Errorf("update snapshot %s: %w", key, err)
	}
	snapshotWrites.WithLabelValues("update").Inc()
	logf.FromContext(ctx).Info("published snapshot", "namespace", ns, "version", p.version, "bytes", len(p.data),
		"redis", p.place.String())
	if old, err := snapshot.Parse([]byte(cm.Data[snapshot.DataKey])); err == nil {
		return &redisPlace{backend: cm.Annotations[AnnotationBackend], redis: old.Redis}, nil
	}
	return nil, nil
}

func fill(cm *corev1.ConfigMap, p published) {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[snapshot.LabelSnapshot] = "true"
	cm.Labels["app.kubernetes.io/managed-by"] = "ratelimit-operator"
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[snapshot.AnnotationVersion] = p.version
	if p.place.backend == backend.Default {
		delete(cm.Annotations, AnnotationBackend)
	} else {
		cm.Annotations[AnnotationBackend] = p.place.backend
	}
	cm.Data = map[string]string{snapshot.DataKey: string(p.data)}
	cm.BinaryData = nil
	cm.OwnerReferences = p.owners
}

func equalConfigMaps(a, b *corev1.ConfigMap) bool {
	return a.Data[snapshot.DataKey] == b.Data[snapshot.DataKey] && len(a.Data) == len(b.Data) &&
		len(a.BinaryData) == 0 && a.Labels[snapshot.LabelSnapshot] == "true" &&
		a.Labels["app.kubernetes.io/managed-by"] == "ratelimit-operator" &&
		a.Annotations[snapshot.AnnotationVersion] == b.Annotations[snapshot.AnnotationVersion] &&
		a.Annotations[AnnotationBackend] == b.Annotations[AnnotationBackend] &&
		slices.EqualFunc(a.OwnerReferences, b.OwnerReferences, func(x, y metav1.OwnerReference) bool {
			return x.UID == y.UID && x.Name == y.Name
		})
}

// remove deletes the ConfigMap of a namespace without valid policies.
func (r *Reconciler) remove(ctx context.Context, ns string) error {
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
	r.Publications.record(ctx, ns, publishedState{})
	return nil
}
