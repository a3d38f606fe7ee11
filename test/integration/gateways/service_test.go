package gateways_test

import (
	"net"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What config/service defines and the gateways must name.
const (
	serviceDir       = "config/service"
	serviceName      = "ratelimit-service"
	grpcPortName     = "grpc"
	forwardAuthName  = "forward-auth"
	metricsPort      = 9090
	redisCredentials = "ratelimit-redis-credentials"
	redisMountPath   = "/var/run/secrets/ratelimit/redis"
	gatewayPodLabel  = "ratelimit.dev/gateway"
)

// rendered is config/service, decoded: the Deployment, its one container and the Service.
type rendered struct {
	m   manifest
	dep *appsv1.Deployment
	ctr corev1.Container
	svc *corev1.Service
}

func renderService(t *testing.T) rendered {
	t.Helper()
	r := rendered{m: render(t, serviceDir), dep: &appsv1.Deployment{}, svc: &corev1.Service{}}
	r.m.decode(t, "Deployment", serviceName, r.dep)
	r.m.decode(t, "Service", serviceName, r.svc)
	if n := len(r.dep.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("deployment has %d containers, want 1", n)
	}
	r.ctr = r.dep.Spec.Template.Spec.Containers[0]
	for _, u := range r.m {
		if u.GetNamespace() != "" {
			t.Errorf("%s %s sets namespace %s; config/service is applied with -n", u.GetKind(), u.GetName(), u.GetNamespace())
		}
	}
	return r
}

// servicePort is the Service's port of name, failing when it is missing.
func (r rendered) servicePort(t *testing.T, name string) corev1.ServicePort {
	t.Helper()
	i := slices.IndexFunc(r.svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("service %s has no port %s: %+v", serviceName, name, r.svc.Spec.Ports)
	}
	return r.svc.Spec.Ports[i]
}

// containerPort resolves a port (number or name) against the container's ports.
func (r rendered) containerPort(p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range r.ctr.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

// selects reports whether sel matches the Deployment's pods.
func (r rendered) selects(t *testing.T, sel *metav1.LabelSelector) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %+v: %v", sel, err)
	}
	return !s.Empty() && s.Matches(labels.Set(r.dep.Spec.Template.Labels))
}

// TestServiceDeploymentArgs: two replicas of the sidecar binary watching its namespace's
// snapshot (the namespace from the downward API), with both gateway fronts on all interfaces
// and the check API off.
func TestServiceDeploymentArgs(t *testing.T) {
	r := renderService(t)
	if r.dep.Spec.Replicas == nil || *r.dep.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", r.dep.Spec.Replicas)
	}
	args := r.ctr.Args
	for _, want := range []string{"--snapshot-watch", "--grpc-bind-address=:8081", "--forward-auth-bind-address=:8082", "--http-bind-address=", "--metrics-bind-address=:9090"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	if !slices.Equal(r.ctr.Command, []string{"/usr/local/bin/sidecar"}) {
		t.Errorf("command %q, want the sidecar binary", r.ctr.Command)
	}
	checkTrustedCIDRs(t, r)
	if env := envVar(r.ctr, "POD_NAMESPACE"); env == nil || env.ValueFrom == nil || env.ValueFrom.FieldRef == nil ||
		env.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE %+v: want the downward API's metadata.namespace", env)
	}
}

// TestServiceDeploymentPod: the fronts' ports, probes on the metrics port, config/sidecar's
// ServiceAccount (rendered with its Role), the Redis credentials Secret mounted (optional) in
// these pods, and the replicas spread over nodes.
func TestServiceDeploymentPod(t *testing.T) {
	r := renderService(t)
	for name, want := range map[string]int32{grpcPortName: 8081, forwardAuthName: 8082, "metrics": metricsPort} {
		if got := r.containerPort(intstr.FromString(name)); got != want {
			t.Errorf("container port %s = %d, want %d", name, got, want)
		}
	}
	for path, p := range map[string]*corev1.Probe{"/healthz": r.ctr.LivenessProbe, "/readyz": r.ctr.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || r.containerPort(p.HTTPGet.Port) != metricsPort {
			t.Errorf("probe %+v: want GET %s on %d", p, path, metricsPort)
		}
	}
	pod := r.dep.Spec.Template.Spec
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
		if r.m.find(kind, "ratelimit-sidecar") == nil {
			t.Errorf("config/sidecar's %s ratelimit-sidecar is not rendered", kind)
		}
	}
	if pod.ServiceAccountName != "ratelimit-sidecar" {
		t.Errorf("service account %q, want config/sidecar's ratelimit-sidecar", pod.ServiceAccountName)
	}
	if !mountsOptionalSecret(pod, r.ctr, redisMountPath, redisCredentials) {
		t.Errorf("secret %s not mounted (optional, read-only) at %s: mounts %+v, volumes %+v", redisCredentials, redisMountPath, r.ctr.VolumeMounts, pod.Volumes)
	}
	if !spreadsOverNodes(t, r) {
		t.Errorf("pods neither spread over nor prefer distinct nodes: %+v %+v", pod.TopologySpreadConstraints, pod.Affinity)
	}
}

// checkTrustedCIDRs: --forward-auth-trusted-cidrs comes from the rendered ConfigMap, through
// an environment variable, and its shipped value is a list of CIDRs the sidecar can parse.
func checkTrustedCIDRs(t *testing.T, r rendered) {
	t.Helper()
	const arg = "--forward-auth-trusted-cidrs=$(FORWARD_AUTH_TRUSTED_CIDRS)"
	env := envVar(r.ctr, "FORWARD_AUTH_TRUSTED_CIDRS")
	if !slices.Contains(r.ctr.Args, arg) || env == nil || env.ValueFrom == nil || env.ValueFrom.ConfigMapKeyRef == nil {
		t.Fatalf("want %s with the variable from a ConfigMap; args %q, env %+v", arg, r.ctr.Args, env)
	}
	ref := env.ValueFrom.ConfigMapKeyRef
	var cm corev1.ConfigMap
	r.m.decode(t, "ConfigMap", ref.Name, &cm)
	value := cm.Data[ref.Key]
	for _, c := range strings.Split(value, ",") {
		if _, _, err := net.ParseCIDR(c); err != nil {
			t.Errorf("ConfigMap %s key %s = %q: %v", ref.Name, ref.Key, value, err)
		}
	}
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return nil
	}
	return &c.Env[i]
}

func mountsOptionalSecret(pod corev1.PodSpec, c corev1.Container, path, secret string) bool {
	i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == path && vm.ReadOnly })
	if i < 0 {
		return false
	}
	return slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == c.VolumeMounts[i].Name && v.Secret != nil && v.Secret.SecretName == secret &&
			v.Secret.Optional != nil && *v.Secret.Optional
	})
}

// spreadsOverNodes: a topology spread constraint or a preferred pod anti-affinity on the node
// name, selecting the Deployment's own pods.
func spreadsOverNodes(t *testing.T, r rendered) bool {
	t.Helper()
	pod := r.dep.Spec.Template.Spec
	for _, c := range pod.TopologySpreadConstraints {
		if c.TopologyKey == corev1.LabelHostname && r.selects(t, c.LabelSelector) {
			return true
		}
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, w := range pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if w.PodAffinityTerm.TopologyKey == corev1.LabelHostname && r.selects(t, w.PodAffinityTerm.LabelSelector) {
			return true
		}
	}
	return false
}

// TestServiceHardened: non-root, no privilege escalation, no capabilities, a read-only root
// file system, the runtime's seccomp profile, and bounded resources.
func TestServiceHardened(t *testing.T) {
	r := renderService(t)
	if psc := r.dep.Spec.Template.Spec.SecurityContext; !hardenedPod(psc) {
		t.Errorf("pod security context %+v: want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	if sc := r.ctr.SecurityContext; !hardenedContainer(sc) {
		t.Errorf("container security context %+v: want a read-only root, no escalation, every capability dropped", sc)
	}
	res := r.ctr.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if res.Requests.Name(name, "").IsZero() || res.Limits.Name(name, "").IsZero() {
			t.Errorf("resources %+v: want requests and limits of %s", res, name)
		}
	}
}

func hardenedPod(psc *corev1.PodSecurityContext) bool {
	return psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot &&
		psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
}

func hardenedContainer(sc *corev1.SecurityContext) bool {
	return sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
		sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && sc.Capabilities != nil &&
		slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0
}

// TestServicePorts: the Service sends grpc 8081 and forward-auth 8082 to the container's
// ports of those numbers.
func TestServicePorts(t *testing.T) {
	r := renderService(t)
	if r.svc.Spec.Type != corev1.ServiceTypeClusterIP || !r.selects(t, &metav1.LabelSelector{MatchLabels: r.svc.Spec.Selector}) {
		t.Errorf("service type %s selector %v: want a ClusterIP selecting the deployment's pods", r.svc.Spec.Type, r.svc.Spec.Selector)
	}
	if p := r.servicePort(t, grpcPortName); p.Port != 8081 || r.containerPort(p.TargetPort) != 8081 ||
		p.AppProtocol == nil || *p.AppProtocol != "grpc" {
		t.Errorf("grpc port %+v: want 8081 -> 8081, appProtocol grpc", p)
	}
	if p := r.servicePort(t, forwardAuthName); p.Port != 8082 || r.containerPort(p.TargetPort) != 8082 {
		t.Errorf("forward-auth port %+v: want 8082 -> 8082", p)
	}
}

// TestServiceDisruptionAndScaling: the PodDisruptionBudget keeps one of the Deployment's pods
// and the HorizontalPodAutoscaler scales the Deployment from 2 to 10 on CPU.
func TestServiceDisruptionAndScaling(t *testing.T) {
	r := renderService(t)
	var pdb policyv1.PodDisruptionBudget
	r.m.decode(t, "PodDisruptionBudget", serviceName, &pdb)
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) || !r.selects(t, pdb.Spec.Selector) {
		t.Errorf("PDB %+v: want minAvailable 1 over the deployment's pods", pdb.Spec)
	}

	var hpa autoscalingv2.HorizontalPodAutoscaler
	r.m.decode(t, "HorizontalPodAutoscaler", serviceName, &hpa)
	ref := hpa.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != r.dep.Name {
		t.Errorf("HPA targets %+v, want the Deployment %s", ref, r.dep.Name)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 2 || hpa.Spec.MaxReplicas != 10 {
		t.Errorf("HPA %+v: want 2..10 replicas", hpa.Spec)
	}
	if m := hpa.Spec.Metrics; len(m) != 1 || m[0].Resource == nil || m[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("HPA metrics %+v: want CPU only", m)
	}
}

// TestServiceNetworkPolicy: the check ports admit only pods labelled as gateways, the
// metrics port admits the cluster, and nothing else is open.
func TestServiceNetworkPolicy(t *testing.T) {
	r := renderService(t)
	var np networkingv1.NetworkPolicy
	r.m.decode(t, "NetworkPolicy", serviceName, &np)
	if !r.selects(t, &np.Spec.PodSelector) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Fatalf("network policy selects %+v for %v: want the deployment's pods, Ingress", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}
	open := map[int32]bool{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Errorf("rule %+v opens every port", rule)
		}
		for _, p := range rule.Ports {
			port := r.containerPort(*p.Port)
			open[port] = true
			if (port == 8081 || port == 8082) && !gatewaysOnly(rule) {
				t.Errorf("port %d open to %+v: want only pods labelled %s=true", port, rule.From, gatewayPodLabel)
			}
		}
	}
	if len(open) != 3 || !open[8081] || !open[8082] || !open[metricsPort] {
		t.Errorf("open ports %v: want exactly 8081, 8082 and %d", open, metricsPort)
	}
}

// gatewaysOnly reports whether every peer of rule is a pod labelled as a gateway.
func gatewaysOnly(rule networkingv1.NetworkPolicyIngressRule) bool {
	for _, peer := range rule.From {
		if peer.IPBlock != nil || peer.PodSelector == nil || peer.PodSelector.MatchLabels[gatewayPodLabel] != "true" {
			return false
		}
	}
	return len(rule.From) > 0
}
