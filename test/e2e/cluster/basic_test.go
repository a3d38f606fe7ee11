package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestPodRuns: the cluster itself works. A pod of the restricted standard reaches Running,
// reaches the API server through the kubernetes Service by its DNS name, and its own
// Service's name resolves for another pod.
func TestPodRuns(t *testing.T) {
	c := need(t)
	const ns = "e2e-basic"
	namespace(t, c, ns)
	defer dump(t, c, ns)
	apply(t, c, ns, helloApp("hello", c.Images.Agnhost))
	t0 := time.Now()
	kc(t, c, "-n", ns, "rollout", "status", "deploy/hello", "--timeout=120s")
	measure("Deployment created → pod Ready", time.Since(t0))

	// A second pod dials the API server and the first pod by Service name, then exits 0.
	apply(t, c, ns, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: dial
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    seccompProfile: {type: RuntimeDefault}
  initContainers:
  - name: api
    image: %[1]s
    imagePullPolicy: IfNotPresent
    command: [/agnhost, connect, --timeout=5s, kubernetes.default.svc.cluster.local:443]
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
  containers:
  - name: hello
    image: %[1]s
    imagePullPolicy: IfNotPresent
    command: [/agnhost, connect, --timeout=5s, hello:80]
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
`, c.Images.Agnhost))
	wait.Eventually(t, 2*time.Minute, "the dial pod to succeed", func() error {
		phase := kc(t, c, "-n", ns, "get", "pod", "dial", "-o", "jsonpath={.status.phase}")
		switch phase {
		case "Succeeded":
			return nil
		case "Failed":
			logs, _ := c.Kubectl(t.Context(), nil, "-n", ns, "logs", "dial", "--all-containers")
			return wait.Abort(fmt.Errorf("dial pod failed: %s", logs))
		}
		return fmt.Errorf("phase %q", phase)
	})

	// The Service answers from the node (or through the API server elsewhere).
	s := newSvcClient(t, c)
	r, err := s.get(t.Context(), ns, "hello", "/", nil)
	if err != nil || r.status != 200 || !strings.Contains(r.body, "hello") {
		t.Fatalf("GET the hello Service: %v %d %q", err, r.status, r.body)
	}
	kc(t, c, "delete", "namespace", ns, "--wait=false")
}
