package gateways_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// fieldOwner is the field manager of the dry-run applies.
const fieldOwner = "ratelimit-gateways-test"

// gatewayCRDs are CRDs the shipped manifests need, one per project: each must be Established.
var gatewayCRDs = []string{
	"authorizationpolicies.security.istio.io",
	"httproutes.gateway.networking.k8s.io",
	"referencegrants.gateway.networking.k8s.io",
	"securitypolicies.gateway.envoyproxy.io",
	"middlewares.traefik.io",
}

// TestGatewayCRDsEstablished: the pinned projects' CRDs were installed and are served.
func TestGatewayCRDsEstablished(t *testing.T) {
	e := env(t)
	for _, name := range gatewayCRDs {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := e.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Errorf("CRD %s: %v", name, err)
			continue
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		if !slices.ContainsFunc(conditions, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == "Established" && m["status"] == "True"
		}) {
			t.Errorf("CRD %s not Established: %v", name, conditions)
		}
	}
}

// TestManifestsAcceptedByAPIServer: everything config/service and each config/gateways/*
// kustomization render, and the optional ReferenceGrant, is server-side applied (dry run)
// without an error or a warning. Objects without a namespace go into appNamespace, which
// enforces and warns about the restricted Pod Security Standard.
func TestManifestsAcceptedByAPIServer(t *testing.T) {
	e := env(t)
	c, warnings := kube.NewWarningClient(t, e)
	ensureNamespace(t, c, appNamespace, map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	})
	ensureNamespace(t, c, "istio-system", nil)

	dirs := []string{serviceDir}
	found, err := filepath.Glob(repoPath("config/gateways/*/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range found {
		rel, _ := filepath.Rel(repoPath("."), filepath.Dir(k))
		dirs = append(dirs, filepath.ToSlash(rel))
	}
	for _, want := range []string{istioDir, envoyGatewayDir, ingressNginxDir, traefikDir} {
		if !slices.Contains(dirs, want) {
			t.Errorf("no kustomization in %s (found %v)", want, dirs)
		}
	}
	for _, dir := range dirs {
		t.Run(strings.TrimPrefix(dir, "config/"), func(t *testing.T) {
			for _, u := range render(t, dir) {
				if err := dryRunApply(t, c, u); err != nil {
					t.Errorf("API server refuses %s %s: %v", u.GetKind(), u.GetName(), err)
				}
				if w := warnings.Take(); len(w) > 0 {
					t.Errorf("%s %s drew warnings: %q", u.GetKind(), u.GetName(), w)
				}
			}
		})
	}
	t.Run("envoy-gateway/referencegrant", func(t *testing.T) {
		for _, u := range readManifest(t, referenceGrant) {
			if err := dryRunApply(t, c, u); err != nil {
				t.Errorf("API server refuses %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	})
}

// dryRunApply server-side applies a copy of obj as a dry run (like `kubectl apply
// --server-side --dry-run=server -n apps`), in appNamespace when it is namespaced and names
// none.
func dryRunApply(t *testing.T, c client.Client, obj *unstructured.Unstructured) error {
	t.Helper()
	u := obj.DeepCopy()
	if u.GetNamespace() == "" {
		namespaced, err := c.IsObjectNamespaced(u)
		if err != nil {
			return err
		}
		if namespaced {
			u.SetNamespace(appNamespace)
		}
	}
	return c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll)
}

// ensureNamespace creates a namespace for real (dry-run objects need theirs to exist).
func ensureNamespace(t *testing.T, c client.Client, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}
