package injection

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
)

// TestInjectedSample: config/samples/example-app's pod, created in a namespace that
// did not opt in, gets the sidecar (its own label opts in) as a proxy in front of the app's
// port; the sample's Service targets the injected proxy port and its NetworkPolicy admits
// exactly the sidecar's declared ports; its policy is example-app-sidecar's.
func TestInjectedSample(t *testing.T) {
	objs := map[string]map[string]any{}
	for _, d := range manifests.Kustomize(t, "config/samples/example-app") {
		objs[d.Object.GetKind()] = d.Object.Object
	}
	var dep appsv1.Deployment
	var svc corev1.Service
	var np networkingv1.NetworkPolicy
	for kind, into := range map[string]any{"Deployment": &dep, "Service": &svc, "NetworkPolicy": &np} {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[kind], into); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	ns := namespace(t, "sample-", nil)
	pod := &corev1.Pod{ObjectMeta: dep.Spec.Template.ObjectMeta, Spec: dep.Spec.Template.Spec}
	pod.GenerateName, pod.Namespace = "echo-", ns
	sc := sidecar(create(t, pod))
	if sc == nil {
		t.Fatal("the sample's pod got no sidecar")
	}
	var ports []int32
	for _, p := range sc.Ports {
		ports = append(ports, p.ContainerPort)
	}
	if !slices.Contains(sc.Args, "--upstream=http://127.0.0.1:9376") || !slices.Contains(sc.Args, "--proxy-bind-address=:8000") {
		t.Errorf("sidecar args %q: want the proxy on 8000 in front of the app's 9376", sc.Args)
	}
	if tp := svc.Spec.Ports[0].TargetPort.IntValue(); !slices.Contains(ports, int32(tp)) || tp != 8000 {
		t.Errorf("Service targetPort %v is not the injected proxy port (declared %v)", svc.Spec.Ports[0].TargetPort, ports)
	}
	var allowed []int32
	for _, p := range np.Spec.Ingress[0].Ports {
		allowed = append(allowed, int32(p.Port.IntValue()))
	}
	if !slices.Equal(allowed, ports) {
		t.Errorf("NetworkPolicy admits %v, the sidecar declares %v", allowed, ports)
	}
	root := kube.RepoRoot()
	a, errA := os.ReadFile(filepath.Join(root, "config/samples/example-app-sidecar/ratelimitpolicy.yaml"))
	b, errB := os.ReadFile(filepath.Join(root, "config/samples/example-app/ratelimitpolicy.yaml"))
	if errA != nil || errB != nil || string(a) != string(b) {
		t.Errorf("the injected sample's policy is not example-app-sidecar's (%v, %v)", errA, errB)
	}
}
