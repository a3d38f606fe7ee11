package controller

import (
	"context"
	"fmt"
	"slices"

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

// AnnotationBackend on a snapshot ConfigMap names the RedisBackend whose Redis the
// snapshot names; absent for the manager's default Redis. It tells a later sync that the
// namespace moved, and from where.
const AnnotationBackend = "policy.ratelimit.dev/redis-backend"

// published is what a snapshot ConfigMap is written to hold.
type published struct {
	data    []byte
	version string
	owners  []metav1.OwnerReference
	backend string // the RedisBackend serving the namespace; "" the default Redis
}

// write creates or updates the ConfigMap when its data, labels, owners or backend differ.
// It returns the backend the ConfigMap named before, and whether that differs from p's (the
// namespace moved; false when there was no ConfigMap).
func (r *SnapshotReconciler) write(ctx context.Context, ns string, p published) (from string, moved bool, err error) {
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}
	err = r.Get(ctx, key, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}
		fill(&cm, p)
		if err := r.Create(ctx, &cm); err != nil {
			return "", false, fmt.Errorf("create snapshot %s: %w", key, err)
		}
		snapshotWrites.WithLabelValues("create").Inc()
		logf.FromContext(ctx).Info("published snapshot", "namespace", ns, "version", p.version, "bytes", len(p.data),
			"redis", backend.Describe(p.backend))
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("get snapshot %s: %w", key, err)
	}
	from = cm.Annotations[AnnotationBackend]
	want := cm.DeepCopy()
	fill(want, p)
	if equalConfigMaps(&cm, want) {
		return from, false, nil
	}
	if err := r.Update(ctx, want); err != nil {
		return "", false, fmt.Errorf("update snapshot %s: %w", key, err)
	}
	snapshotWrites.WithLabelValues("update").Inc()
	logf.FromContext(ctx).Info("published snapshot", "namespace", ns, "version", p.version, "bytes", len(p.data),
		"redis", backend.Describe(p.backend))
	return from, from != p.backend, nil
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
	if p.backend == backend.Default {
		delete(cm.Annotations, AnnotationBackend)
	} else {
		cm.Annotations[AnnotationBackend] = p.backend
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
	r.Publications.record(ctx, ns, publishedState{})
	return nil
}
