package injection

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
	"github.com/ratelimit-dev/ratelimit-operator/internal/webhook/podinject"
)

// namespace creates a namespace enforcing the restricted Pod Security Standard with the extra
// labels (e.g. the opt-in), deleted at cleanup. The API server's own PodSecurity admission
// thus judges every injected pod.
func namespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	e := env(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + rand.String(6), Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// releaseNamespace is the chart's release namespace, which the webhook never matches, labelled
// as opted in all the same: pods there are the control group, stored as submitted.
func releaseNamespace(t *testing.T) string {
	t.Helper()
	c := env(t).Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", inject.LabelInject: inject.ValueEnabled,
	}}}
	if err := c.Create(context.Background(), ns); err != nil && client.IgnoreAlreadyExists(err) != nil {
		t.Fatalf("create namespace %s: %v", releaseNS, err)
	}
	return releaseNS
}

// optIn is the opt-in label (or annotation).
var optIn = map[string]string{inject.LabelInject: inject.ValueEnabled}

// agnhost is config/samples/example-app-sidecar's app container, alone in a restricted pod, as a
// ReplicaSet would create it (generateName), with extra labels and annotations.
func agnhost(ns string, labels, annotations map[string]string) *corev1.Pod {
	l := map[string]string{"app.kubernetes.io/name": "echo"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "echo-", Namespace: ns, Labels: l, Annotations: annotations},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "upstream",
				Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
				Args:  []string{"serve-hostname", "--port=9376"},
				Ports: []corev1.ContainerPort{{Name: "upstream", ContainerPort: 9376, Protocol: corev1.ProtocolTCP}},
				SecurityContext: &corev1.SecurityContext{
					ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// create creates pod and returns it as the API server stored it.
func create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	c := env(t).Client
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod in %s: %v", pod.Namespace, err)
	}
	stored := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), stored); err != nil {
		t.Fatalf("get pod: %v", err)
	}
	return stored
}

// asSubmitted is what of a stored pod its submitter chose or the API server defaulted: the
// spec, labels and annotations as JSON. Two pods submitted alike and stored as submitted give
// the same; a mutated one does not.
func asSubmitted(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Labels      map[string]string
		Annotations map[string]string
		Spec        corev1.PodSpec
	}{pod.Labels, pod.Annotations, pod.Spec})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sidecar is the injected sidecar of a stored pod, nil when there is none.
func sidecar(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == inject.ContainerName {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == inject.ContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// calls is how many admission requests the injection webhook answered, by result, from
// ratelimit_sidecar_injections_total on controller-runtime's registry.
func calls(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "ratelimit_sidecar_injections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// sawCalls fails unless the webhook answered want more requests of each result than before.
func sawCalls(t *testing.T, before map[string]float64, want map[string]float64) {
	t.Helper()
	after := calls(t)
	for _, r := range []string{podinject.ResultInjected, podinject.ResultSkipped, podinject.ResultDenied} {
		if got := after[r] - before[r]; got != want[r] {
			t.Errorf("webhook answered %v more %s requests, want %v", got, r, want[r])
		}
	}
}
