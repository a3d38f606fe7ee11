package inject

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
)

// Result is what Inject decided.
type Result struct {
	// Decision says whether the sidecar was injected, and why.
	Decision
	// Pod is the mutated copy when Inject is true; nil otherwise.
	Pod *corev1.Pod
}

// Inject decides (Decide) and, when the Pod opted in, returns a copy with the sidecar, its
// volumes and the recording labels and annotation; the Pod passed in is not changed. An
// error means the Pod must be refused: an *AnnotationError names the annotation to fix.
func Inject(pod *corev1.Pod, namespaceLabels map[string]string, cfg Config) (Result, error) {
	d, err := Decide(pod, namespaceLabels)
	if err != nil || !d.Inject {
		return Result{Decision: d}, err
	}
	if pod.Spec.HostNetwork {
		return Result{}, errors.New("a hostNetwork pod cannot get the sidecar: its ports would be the node's; opt it out with the label " +
			LabelInject + "=" + ValueDisabled)
	}
	if err := checkVolumes(pod); err != nil {
		return Result{}, err
	}
	s, err := readSettings(pod, cfg)
	if err != nil {
		return Result{}, err
	}
	out := pod.DeepCopy()
	out.Spec.InitContainers = append(out.Spec.InitContainers, sidecar(cfg, s))
	out.Spec.Volumes = append(out.Spec.Volumes, volumes()...)
	out.Labels, out.Annotations = record(out.Labels, out.Annotations, cfg)
	return Result{Decision: d, Pod: out}, nil
}
