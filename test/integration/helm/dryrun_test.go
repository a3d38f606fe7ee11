package helm_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// fieldOwner is the field manager of the dry-run applies.
const fieldOwner = "ratelimit-helm-test"

// TestRenderedAcceptedByAPIServer: every object the chart renders, with the default, custom,
// off and mirror values, is server-side applied (dry run) without an error or a warning: the
// CRD, the prometheus-operator's ServiceMonitor and PrometheusRule and cert-manager's
// Certificate and Issuer included. Each namespace the objects name enforces the restricted
// Pod Security Standard.
func TestRenderedAcceptedByAPIServer(t *testing.T) {
	e := env(t)
	c, warnings := kube.NewWarningClient(t, e)
	for name, files := range map[string][]string{"defaults": nil, "custom": {customValues}, "off": {offValues}, "mirror": {mirrorValues}} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, files)
			if len(objs) < 10 {
				t.Fatalf("only %d objects rendered: %v", len(objs), objs.names())
			}
			applied := 0
			for _, u := range objs {
				if ns := u.GetNamespace(); ns != "" {
					ensureNamespace(t, c, ns)
				} else if namespaced, err := c.IsObjectNamespaced(u); err != nil {
					t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
					continue
				} else if namespaced {
					t.Errorf("namespaced %s %s rendered without a namespace", u.GetKind(), u.GetName())
					continue
				}
				if err := dryRunApply(c, u); err != nil {
					t.Errorf("API server refuses %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
				}
				if w := warnings.Take(); len(w) > 0 {
					t.Errorf("%s %s/%s drew warnings: %q", u.GetKind(), u.GetNamespace(), u.GetName(), w)
				}
				applied++
			}
			t.Logf("%d objects applied (dry run)", applied)
		})
	}
}

// dryRunApply server-side applies a copy of u as a dry run.
func dryRunApply(c client.Client, u *unstructured.Unstructured) error {
	return c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
		client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll)
}

// ensureNamespace creates a namespace that enforces and warns about the restricted Pod
// Security Standard, for real (dry-run objects need theirs to exist).
func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}
