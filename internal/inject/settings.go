package inject

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// settings are one Pod's sidecar: the Config with the Pod's annotations applied.
type settings struct {
	mode     Mode
	upstream int32 // the app's port, in proxy mode
	ports    Ports
	requests Resources
}

// readSettings applies the Pod's annotations to cfg, refusing any that is malformed, out of
// bounds, or collides with a port of the app.
func readSettings(pod *corev1.Pod, cfg Config) (settings, error) {
	a := pod.Annotations
	s := settings{ports: cfg.Ports, requests: cfg.Requests}
	var err error
	if s.mode, err = parseMode(a); err != nil {
		return s, err
	}
	if s.mode == ModeProxy {
		if s.upstream, err = resolveUpstream(pod); err != nil {
			return s, err
		}
	}
	if s.ports.Proxy, err = parsePort(a, AnnotationProxyPort, cfg.Ports.Proxy); err != nil {
		return s, err
	}
	if s.ports.Metrics, err = parsePort(a, AnnotationMetricsPort, cfg.Ports.Metrics); err != nil {
		return s, err
	}
	if s.requests.CPU, err = parseRequest(a, AnnotationCPU, cfg.Requests.CPU, cfg.Max.CPU); err != nil {
		return s, err
	}
	if s.requests.Memory, err = parseRequest(a, AnnotationMemory, cfg.Requests.Memory, cfg.Max.Memory); err != nil {
		return s, err
	}
	return s, s.checkPorts(appPorts(pod))
}

// parseRequest reads a resource-request annotation, def when absent; above max is refused.
func parseRequest(annotations map[string]string, key string, def, maxQ resource.Quantity) (resource.Quantity, error) {
	v, ok := annotations[key]
	if !ok {
		return def, nil
	}
	q, err := resource.ParseQuantity(v)
	switch {
	case err != nil:
		return q, annotationError(key, v, "is not a quantity: %v", err)
	case q.Sign() <= 0:
		return q, annotationError(key, v, "must be more than 0")
	case q.Cmp(maxQ) > 0:
		return q, annotationError(key, v, "is above the maximum the installation allows (%s)", maxQ.String())
	}
	return q, nil
}

// listening are the ports the sidecar listens on, each with the annotation that moves it
// ("" for one only the installation sets).
func (s settings) listening() map[int32]string {
	out := map[int32]string{s.ports.Metrics: AnnotationMetricsPort}
	switch s.mode {
	case ModeProxy:
		out[s.ports.Proxy] = AnnotationProxyPort
	case ModeEnvoy:
		out[s.ports.GRPC] = ""
	case ModeCheck:
		out[s.ports.Check] = ""
	}
	return out
}

// checkPorts refuses a sidecar port that an app container declares, or two sidecar ports
// that are one: they share the Pod's network namespace.
func (s settings) checkPorts(app map[int32]string) error {
	l := s.listening()
	if len(l) < 2 {
		return annotationError(AnnotationMetricsPort, fmt.Sprint(s.ports.Metrics), "is also the sidecar's %s port", s.mode)
	}
	for _, port := range slices.Sorted(maps.Keys(l)) {
		annotation := l[port]
		owner, taken := app[port]
		if !taken {
			continue
		}
		if annotation == "" {
			return fmt.Errorf("the sidecar's %s port %d is container %s's port; the installation's sidecarInjection.ports must move it", s.mode, port, owner)
		}
		return annotationError(annotation, fmt.Sprint(port), "is container %s's port; choose another", owner)
	}
	return nil
}
