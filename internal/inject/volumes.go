package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// volumes are the sidecar's: the namespace's snapshot ConfigMap and Redis credentials Secret,
// both optional, so a namespace without policies (or without AUTH) still starts its Pods.
func volumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: SnapshotVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: SnapshotConfigMap}, Optional: ptr.To(true)}}},
		{Name: CredentialsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: CredentialsSecret, Optional: ptr.To(true)}}},
	}
}

// checkVolumes refuses a Pod that already has a volume of one of the sidecar's names.
func checkVolumes(pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		if v.Name == SnapshotVolume || v.Name == CredentialsVolume {
			return fmt.Errorf("the pod already has a volume named %s, which the sidecar needs; rename it or opt out with %s=%s", v.Name, LabelInject, ValueDisabled)
		}
	}
	return nil
}
