package kube

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// NewNamespace creates a namespace of its own for one test, named prefix + random letters.
// At cleanup its policies are deleted first (a running manager finalizes them), then the
// namespace.
func NewNamespace(t testing.TB, e *Env, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + rand.String(8)}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = e.Client.DeleteAllOf(ctx, &v1alpha1.RateLimitPolicy{}, client.InNamespace(ns.Name))
		_ = e.Client.Delete(ctx, ns)
	})
	return ns.Name
}

// SamplePaths lists the policy samples under config/samples.
func SamplePaths(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "samples", "policy_*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples under config/samples (err %v)", err)
	}
	return paths
}

// ReadObject decodes one YAML manifest into an unstructured object, exactly what kubectl
// would send, with no client-side type round trip.
func ReadObject(t testing.TB, path string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return &unstructured.Unstructured{Object: m}
}
