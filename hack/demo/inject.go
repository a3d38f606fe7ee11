package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

const (
	// injectNS is the namespace the injection step opts in.
	injectNS = "demo-inject"
	// sidecarImage is the image the demo's manager injects (nothing pulls it here: no kubelet).
	sidecarImage = "ratelimit-operator:dev"
)

// withInjectionWebhook installs the chart's sidecar injection MutatingWebhookConfiguration
// (helm template with sidecarInjection.enabled=true), which envtest points at the manager's
// webhook server like the others.
func withInjectionWebhook() (func(*envtest.Environment), error) {
	mwc, err := controlplane.InjectionWebhook("ratelimit-operator", "ratelimit-system", "sidecarInjection.image="+sidecarImage)
	if err != nil {
		return nil, fmt.Errorf("render the chart's injection webhook: %w", err)
	}
	return controlplane.WithInjectionWebhook(mwc), nil
}

// injection creates config/samples/example-app's pod (the app alone, one label,
// one annotation) in an opted-in namespace, shows the sidecar the webhook added, and lists
// it with `kubectl ratelimit sidecars`. No kubelet runs here, so the pod stays Pending.
func (d *demo) injection(ctx context.Context) error {
	d.step("Sidecar injection: the example app's pod, one label and one annotation, gets the sidecar from the webhook")
	pod, err := samplePod()
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n", injectNS)
	if out, err := d.kubectl(ctx, []byte(ns), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("namespace: %w\n%s", err, out)
	}
	d.say("$ kubectl create -n %s -f <the pod template of config/samples/example-app/deployment.yaml>", injectNS)
	if out, err := d.kubectl(ctx, pod, "create", "-n", injectNS, "-f", "-"); err != nil {
		return fmt.Errorf("create the sample's pod: %w\n%s", err, out)
	}
	out, err := d.kubectl(ctx, nil, "get", "pod", "echo", "-n", injectNS, "-o",
		`jsonpath=init container {.spec.initContainers[0].name}: restartPolicy {.spec.initContainers[0].restartPolicy}, image {.spec.initContainers[0].image}{"\n"}args {.spec.initContainers[0].args}{"\n"}labels {.metadata.labels}`)
	if err != nil {
		return fmt.Errorf("kubectl get pod: %w\n%s", err, out)
	}
	if !strings.Contains(out, "ratelimit-sidecar: restartPolicy Always") || !strings.Contains(out, "--upstream=http://127.0.0.1:9376") {
		return fmt.Errorf("the pod did not get the sidecar in front of its upstream port:\n%s", out)
	}
	d.sayBlock(out)
	plugin, err := d.build(ctx, "cmd/kubectl-ratelimit")
	if err != nil {
		return err
	}
	d.say("$ kubectl ratelimit sidecars -n %s", injectNS)
	listed, err := d.plugin(ctx, d.kcfg, plugin, "sidecars", "-n", injectNS)
	if err != nil {
		return fmt.Errorf("kubectl ratelimit sidecars: %w", err)
	}
	if !strings.Contains(string(listed), "all run ["+sidecarImage+"]") {
		return fmt.Errorf("kubectl ratelimit sidecars does not list the pod as current:\n%s", listed)
	}
	d.done("sidecar injection: the example app's pod (label ratelimit.dev/inject=enabled, annotation ratelimit.dev/upstream-port) got the sidecar as a native sidecar proxying to its port")
	return nil
}

// samplePod is the pod config/samples/example-app's Deployment creates, named echo.
func samplePod() ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(), "config", "samples", "example-app", "deployment.yaml"))
	if err != nil {
		return nil, err
	}
	var deploy struct {
		Spec struct {
			Template struct {
				Metadata map[string]any `json:"metadata"`
				Spec     map[string]any `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &deploy); err != nil {
		return nil, fmt.Errorf("example-app: %w", err)
	}
	meta := deploy.Spec.Template.Metadata
	meta["name"] = "echo"
	return yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": deploy.Spec.Template.Spec})
}
