package gateways_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
)

// manifest is the objects of one kustomization or YAML file, in order.
type manifest []*unstructured.Unstructured

// repoPath is rel (slash-separated, from the repository's root) as a local path.
func repoPath(rel string) string { return filepath.Join(kube.RepoRoot(), filepath.FromSlash(rel)) }

// render runs `kubectl kustomize` on dir (relative to the repository's root), as
// `kubectl apply -k` would render it.
func render(t *testing.T, dir string) manifest {
	t.Helper()
	return manifests.Objects(manifests.Kustomize(t, dir))
}

// readManifest reads a YAML file (relative to the repository's root) as it is.
func readManifest(t *testing.T, file string) manifest {
	t.Helper()
	raw, err := os.ReadFile(repoPath(file))
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return split(t, file, raw)
}

// split decodes a multi-document YAML stream into objects, dropping empty documents.
func split(t *testing.T, what string, raw []byte) manifest {
	t.Helper()
	docs, err := manifests.Split(raw)
	if err != nil {
		t.Fatalf("split YAML of %s: %v", what, err)
	}
	return manifests.Objects(docs)
}

// find returns the object of kind and name, or nil.
func (m manifest) find(kind, name string) *unstructured.Unstructured {
	for _, u := range m {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// decode converts the object of kind and name into into. Kubernetes types (runtime.Object)
// are converted strictly, so a misspelt field fails here; other targets (the small structs
// the tests read a CRD's fields into) take just the fields they name, as encoding/json does.
func (m manifest) decode(t *testing.T, kind, name string, into any) {
	t.Helper()
	u := m.find(kind, name)
	if u == nil {
		var have []string
		for _, o := range m {
			have = append(have, o.GetKind()+"/"+o.GetName())
		}
		t.Fatalf("no %s %s among %v", kind, name, have)
	}
	if _, typed := into.(runtime.Object); typed {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
			t.Fatalf("decode %s %s: %v", kind, name, err)
		}
		return
	}
	raw, err := json.Marshal(u.Object)
	if err == nil {
		err = json.Unmarshal(raw, into)
	}
	if err != nil {
		t.Fatalf("decode %s %s: %v", kind, name, err)
	}
}
