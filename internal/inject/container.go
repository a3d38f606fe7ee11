package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// sidecarUser is the image's non-root user (the Dockerfile's USER 65532, distroless nonroot),
// set on the container so it runs as non-root whatever the Pod's securityContext says.
const sidecarUser = 65532

// sidecar is the native sidecar container for s: an init container with restartPolicy
// Always, hardened for the restricted Pod Security Standard.
func sidecar(cfg Config, s settings) corev1.Container {
	return corev1.Container{
		Name:            ContainerName,
		Image:           cfg.Image,
		ImagePullPolicy: cfg.PullPolicy,
		Command:         []string{SidecarCommand},
		Args:            args(cfg, s),
		Env:             env(cfg.Limits.Memory),
		Ports:           ports(s),
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		SecurityContext: securityContext(),
		StartupProbe:    probe("/readyz", s.ports.Metrics, 1, 120),
		ReadinessProbe:  probe("/readyz", s.ports.Metrics, 5, 3),
		LivenessProbe:   probe("/healthz", s.ports.Metrics, 20, 3),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: s.requests.CPU, corev1.ResourceMemory: s.requests.Memory},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: cfg.Limits.CPU, corev1.ResourceMemory: cfg.Limits.Memory},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: SnapshotVolume, MountPath: SnapshotDir, ReadOnly: true},
			{Name: CredentialsVolume, MountPath: CredentialsDir, ReadOnly: true},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// args are the sidecar's flags: the mounted snapshot, the mode's front on its port and every
// other front off (an empty bind address), the metrics port, and the credentials when the
// installation's Redis needs AUTH. The Redis endpoints come from the snapshot.
func args(cfg Config, s settings) []string {
	out := []string{"--snapshot-file=" + SnapshotFile}
	grpc, check := "", ""
	switch s.mode {
	case ModeProxy:
		out = append(out, fmt.Sprintf("--proxy-bind-address=:%d", s.ports.Proxy),
			fmt.Sprintf("--upstream=http://127.0.0.1:%d", s.upstream))
	case ModeEnvoy:
		grpc = fmt.Sprintf("127.0.0.1:%d", s.ports.GRPC)
	case ModeCheck:
		check = fmt.Sprintf("127.0.0.1:%d", s.ports.Check)
	}
	out = append(out, "--grpc-bind-address="+grpc, "--http-bind-address="+check, "--forward-auth-bind-address=",
		fmt.Sprintf("--metrics-bind-address=:%d", s.ports.Metrics))
	if cfg.RedisCredentials {
		out = append(out, "--redis-credentials-path="+CredentialsDir)
	}
	return out
}

// env is POD_NAMESPACE (the sidecar refuses another namespace's snapshot) and GOMEMLIMIT,
// a soft limit below the container's memory limit as in config/samples/example-app-sidecar (100MiB
// of 128Mi): the sidecar collects garbage rarely (--gc-percent=400) until it nears it.
func env(limit resource.Quantity) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "GOMEMLIMIT", Value: goMemLimit(limit)},
	}
}

// goMemLimit is 25/32 of limit (100MiB of 128Mi), in MiB when whole, else in bytes.
func goMemLimit(limit resource.Quantity) string {
	b := limit.Value() / 32 * 25
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return fmt.Sprint(b)
}

// ports declares the sidecar's listening ports (the proxy's only in proxy mode; the
// loopback fronts are not reachable from outside the Pod and are not declared).
func ports(s settings) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	if s.mode == ModeProxy {
		out = append(out, corev1.ContainerPort{Name: "rl-proxy", ContainerPort: s.ports.Proxy, Protocol: corev1.ProtocolTCP})
	}
	return append(out, corev1.ContainerPort{Name: "rl-metrics", ContainerPort: s.ports.Metrics, Protocol: corev1.ProtocolTCP})
}

// securityContext complies with the restricted Pod Security Standard on its own.
func securityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](sidecarUser),
		RunAsGroup:               ptr.To[int64](sidecarUser),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// probe is an HTTP GET of path on the metrics port every period seconds, failing after
// failures misses.
func probe(path string, port, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
		PeriodSeconds:    period,
		FailureThreshold: failures,
	}
}
