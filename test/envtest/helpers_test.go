package envtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/kubetest"
)

// newNamespace creates a namespace of its own for one test and deletes it afterwards.
func newNamespace(t *testing.T, e *kubetest.Env) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + rand.String(8)}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// samplePaths lists the policy samples under config/samples.
func samplePaths(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(kubetest.RepoRoot(), "config", "samples", "policy_*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples found under config/samples (err %v)", err)
	}
	return paths
}

// readObject decodes one YAML manifest into an unstructured object, so tests send exactly
// what a user's kubectl would, with no client-side type round trip.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
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

// set writes value at a dotted path inside obj ("spec.limits.0.requests"), creating maps on
// the way; a numeric element indexes a list.
func set(t *testing.T, obj map[string]any, path string, value any) {
	t.Helper()
	parts := strings.Split(path, ".")
	var cur any = obj
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = value
				return
			}
			if _, ok := c[p]; !ok {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			idx := atoi(t, p)
			if last {
				c[idx] = value
				return
			}
			cur = c[idx]
		default:
			t.Fatalf("set %s: %q is not a map or list", path, strings.Join(parts[:i], "."))
		}
	}
}

// del removes the field at a dotted path of maps.
func del(t *testing.T, obj map[string]any, path string) {
	t.Helper()
	parts := strings.Split(path, ".")
	cur := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			t.Fatalf("del %s: %s is not a map", path, p)
		}
		cur = next
	}
	delete(cur, parts[len(parts)-1])
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("list index %q is not a number", s)
		}
		n = n*10 + int(r-'0')
	}
	return n
}
