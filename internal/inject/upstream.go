package inject

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// resolveUpstream finds the app's container port AnnotationUpstreamPort names (by name) or
// numbers: it must be a port an app container declares.
func resolveUpstream(pod *corev1.Pod) (int32, error) {
	v := pod.Annotations[AnnotationUpstreamPort]
	n, numErr := strconv.ParseInt(v, 10, 32)
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if (numErr == nil && int64(p.ContainerPort) == n) || (numErr != nil && p.Name == v) {
				return p.ContainerPort, nil
			}
		}
	}
	return 0, annotationError(AnnotationUpstreamPort, v, "names no container port of the pod's containers")
}

// appPorts are the container ports the app's containers declare, with the container of each.
func appPorts(pod *corev1.Pod) map[int32]string {
	out := map[int32]string{}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				out[p.ContainerPort] = c.Name
			}
		}
	}
	return out
}
