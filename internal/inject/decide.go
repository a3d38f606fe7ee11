package inject

import (
	corev1 "k8s.io/api/core/v1"
)

// Decision is whether a Pod gets the sidecar, and why.
type Decision struct {
	// Inject is true when the Pod opted in (or its namespace did) and has no sidecar yet.
	Inject bool
	// Reason says why, for logs and the admission response.
	Reason string
}

// Decide applies the opt-in rules: a Pod that says "disabled" (label or annotation) is left
// alone; one that already has the sidecar too; otherwise a Pod saying "enabled", or any Pod
// of a namespace labelled ratelimit.dev/inject=enabled, gets it. A Pod value other than
// enabled or disabled is an *AnnotationError.
func Decide(pod *corev1.Pod, namespaceLabels map[string]string) (Decision, error) {
	choice, err := podChoice(pod)
	if err != nil {
		return Decision{}, err
	}
	switch {
	case choice == ValueDisabled:
		return Decision{Reason: "the pod opted out (" + LabelInject + "=" + ValueDisabled + ")"}, nil
	case hasSidecar(pod):
		return Decision{Reason: "the pod already has a container named " + ContainerName}, nil
	case choice == ValueEnabled:
		return Decision{Inject: true, Reason: "the pod opted in"}, nil
	case namespaceLabels[LabelInject] == ValueEnabled:
		return Decision{Inject: true, Reason: "the namespace opted in"}, nil
	}
	return Decision{Reason: "neither the pod nor its namespace opted in"}, nil
}

// podChoice is the Pod's own LabelInject value, from its label or its annotation:
// "disabled" in either wins, then "enabled" in either; "" when neither is set.
func podChoice(pod *corev1.Pod) (string, error) {
	var found string
	for _, from := range []map[string]string{pod.Labels, pod.Annotations} {
		v, ok := from[LabelInject]
		if !ok {
			continue
		}
		switch v {
		case ValueDisabled:
			return ValueDisabled, nil
		case ValueEnabled:
			found = ValueEnabled
		default:
			return "", annotationError(LabelInject, v, "is not %q or %q", ValueEnabled, ValueDisabled)
		}
	}
	return found, nil
}

// hasSidecar reports whether any container or init container is named ContainerName.
func hasSidecar(pod *corev1.Pod) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == ContainerName {
				return true
			}
		}
	}
	return false
}
