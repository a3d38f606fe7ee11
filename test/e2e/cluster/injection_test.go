package cluster_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// injectNS runs config/samples/example-app: the app alone, its sidecar injected.
const injectNS = "e2e-inject"

// injectedApp applies config/samples/example-app as shipped (the chart installed
// with sidecarInjection.enabled): every echo pod gets the sidecar as a native sidecar, and
// the app's Service answers 200 × the limit, then 429.
func (j *journey) injectedApp(t *testing.T) {
	c := j.c
	namespace(t, c, injectNS)
	t0 := time.Now()
	kc(t, c, "apply", "-k", j.overlay(t, injectNS, []string{"config/samples/example-app"}, ""))
	kc(t, c, "-n", injectNS, "rollout", "status", "deploy/echo", "--timeout=180s")
	kc(t, c, "-n", injectNS, "wait", "--for=condition=Ready", "rlp/echo-per-api-key", "--timeout=60s")
	measure("injected example app applied → Available", time.Since(t0))
	out := kc(t, c, "-n", injectNS, "get", "pods", "-l", "app.kubernetes.io/name=echo", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.initContainers[0].name}/{.spec.initContainers[0].restartPolicy} {.metadata.labels.ratelimit\.dev/injected}{"\n"}{end}`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want the 2 echo pods:\n%s", out)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) != 3 || f[1] != "ratelimit-sidecar/Always" || f[2] != "true" {
			t.Fatalf("pod without an injected native sidecar: %q", l)
		}
	}
	j.waitEnforced(t, injectNS, 5, 3*time.Minute)
	measure("injected example app applied → limit enforced", time.Since(t0))
}

// managerDown stops every manager replica: a pod the opted-in namespace's ReplicaSet
// creates is refused (failurePolicy Fail, never started without its limits) while a pod of a
// namespace that did not opt in is created; once the managers are back the ReplicaSet's
// retry creates the pod, with its sidecar.
func (j *journey) managerDown(t *testing.T) {
	c := j.c
	kc(t, c, "-n", system, "scale", "deploy/"+release, "--replicas=0")
	kc(t, c, "-n", system, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/instance="+release+",app.kubernetes.io/name=ratelimit-operator", "--timeout=120s")
	t0 := time.Now()
	kc(t, c, "-n", injectNS, "scale", "deploy/echo", "--replicas=3")
	wait.Eventually(t, 2*time.Minute, "the ReplicaSet's pod creation refused by the unreachable webhook", func() error {
		ev := kc(t, c, "-n", injectNS, "get", "events", "--field-selector", "reason=FailedCreate", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "inject.ratelimit.dev") {
			return fmt.Errorf("no FailedCreate naming the injection webhook yet: %q", tail(ev, 300))
		}
		return nil
	})
	if n := podCount(t, j, injectNS); n != 2 {
		t.Fatalf("%d echo pods while the webhook is down, want the 2 from before", n)
	}
	plain := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: plain-%s
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: %s
    args: [pause]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`, j.run, j.c.Images.Agnhost)
	apply(t, c, samples, plain)
	kc(t, c, "-n", samples, "delete", "pod", "plain-"+j.run, "--wait=false")
	measure("manager down → opted-in pod refused, other pod created", time.Since(t0))
	t1 := time.Now()
	kc(t, c, "-n", system, "scale", "deploy/"+release, "--replicas=2")
	kc(t, c, "-n", system, "rollout", "status", "deploy/"+release, "--timeout=180s")
	kc(t, c, "-n", injectNS, "rollout", "status", "deploy/echo", "--timeout=600s")
	measure("manager back → the refused pod created (ReplicaSet backoff)", time.Since(t1))
	if n := podCount(t, j, injectNS); n != 3 {
		t.Fatalf("%d echo pods after the managers came back, want 3", n)
	}
	kc(t, c, "-n", injectNS, "scale", "deploy/echo", "--replicas=2")
}

// podCount is how many echo pods of ns are not being deleted, every one with its sidecar.
func podCount(t *testing.T, j *journey, ns string) int {
	t.Helper()
	out := kc(t, j.c, "-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=echo", "-o",
		`jsonpath={range .items[*]}{.metadata.deletionTimestamp}|{.spec.initContainers[0].name}{"\n"}{end}`)
	n := 0
	for _, l := range strings.Fields(out) {
		deleting, sidecar, _ := strings.Cut(l, "|")
		switch {
		case deleting != "":
		case sidecar != "ratelimit-sidecar":
			t.Fatalf("an echo pod of %s without the sidecar: %q", ns, out)
		default:
			n++
		}
	}
	return n
}

// sidecarsAfterUpgrade: after the upgrade to a new image, `kubectl ratelimit sidecars` lists
// the injected pods as running the older sidecar; a rollout restart gives them the new one,
// and the limit holds throughout.
func (j *journey) sidecarsAfterUpgrade(t *testing.T) {
	c := j.c
	plugin := proc.MustBuild(t, "cmd/kubectl-ratelimit")
	sidecars := func() string {
		out, err := exec.CommandContext(t.Context(), plugin, "--kubeconfig", c.Kubeconfig, "sidecars", "-n", injectNS).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl ratelimit sidecars: %v\n%s", err, out)
		}
		return string(out)
	}
	out := sidecars()
	t.Logf("after the upgrade:\n%s", out)
	if !strings.Contains(out, fmt.Sprintf("2 run an older image than [%s]", c.Images.Upgrade)) {
		t.Fatalf("kubectl ratelimit sidecars does not show the 2 pods as older:\n%s", out)
	}
	kc(t, c, "-n", injectNS, "rollout", "restart", "deploy/echo")
	kc(t, c, "-n", injectNS, "rollout", "status", "deploy/echo", "--timeout=180s")
	wait.Eventually(t, 2*time.Minute, "every injected pod on the new image", func() error {
		if out = sidecars(); !strings.Contains(out, fmt.Sprintf("all run [%s]", c.Images.Upgrade)) {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	t.Logf("after the rollout:\n%s", out)
	j.waitEnforced(t, injectNS, 3, 2*time.Minute)
}
