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
	r.Publications.record(ctx, ns, publishedState{})
	return nil
}
