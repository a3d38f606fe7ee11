package injection

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
)

// TestSidecarsShowsOutdatedPods: `kubectl ratelimit sidecars`, the plugin binary, lists an
// injected pod with the image it runs and, against the image the chart's webhook
// configuration says it injects now, marks it current; after an upgrade changes that image
// (the annotation helm upgrade rewrites), the same pod is listed as running an older one.
func TestSidecarsShowsOutdatedPods(t *testing.T) {
	e := env(t)
	ns := namespace(t, "sidecars-", optIn)
	pod := create(t, agnhost(ns, nil, upstream))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteKubeconfig(e.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	plugin := proc.MustBuild(t, "cmd/kubectl-ratelimit")
	list := func() string {
		t.Helper()
		out, err := exec.Command(plugin, "--kubeconfig", kubeconfig, "sidecars", "-n", ns).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl ratelimit sidecars: %v\n%s", err, out)
		}
		return string(out)
	}
	out := list()
	t.Logf("before the upgrade:\n%s", out)
	if !hasFields(out, ns, pod.Name, injectedImage, "v0.1.0_test", "yes") || !kube.ContainsAll(out, []string{"all run [" + injectedImage + "]"}) {
		t.Fatalf("before the upgrade:\n%s", out)
	}
	setInjectedImage(t, e, "ratelimit-operator:0.2.0")
	out = list()
	t.Logf("after the upgrade:\n%s", out)
	if !hasFields(out, ns, pod.Name, injectedImage, "v0.1.0_test", "no") ||
		!kube.ContainsAll(out, []string{"1 run an older image than [ratelimit-operator:0.2.0]"}) {
		t.Fatalf("after the upgrade:\n%s", out)
	}
}

// setInjectedImage rewrites the webhook configuration's injected-image annotation as a helm
// upgrade to image would, and puts it back at cleanup.
func setInjectedImage(t *testing.T, e *kube.Env, image string) {
	t.Helper()
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := e.Client.Get(context.Background(), client.ObjectKey{Name: injectionName}, &mwc); err != nil {
		t.Fatal(err)
	}
	before := mwc.Annotations[inject.AnnotationSidecarImage]
	if before != injectedImage {
		t.Fatalf("the chart's webhook configuration says it injects %q, want %q", before, injectedImage)
	}
	set := func(img string) error {
		patch := client.MergeFrom(mwc.DeepCopy())
		mwc.Annotations[inject.AnnotationSidecarImage] = img
		return e.Client.Patch(context.Background(), &mwc, patch)
	}
	if err := set(image); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set(before) })
}

// hasFields reports whether a line of out has these fields among its own, in this order.
func hasFields(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		i := 0
		for _, f := range strings.Fields(line) {
			if i < len(fields) && f == fields[i] {
				i++
			}
		}
		if i == len(fields) {
			return true
		}
	}
	return false
}
