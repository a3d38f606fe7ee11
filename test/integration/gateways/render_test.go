package gateways_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// manifest is the objects of one kustomization or YAML file, in order.
type manifest []*unstructured.Unstructured

// repoPath is rel (slash-separated, from the repository's root) as a local path.
func repoPath(rel string) string { return filepath.Join(kube.RepoRoot(), filepath.FromSlash(rel)) }

// render runs `kubectl kustomize` on dir (relative to the repository's root), as
// `kubectl apply -k` would render it. kubectl is $KUBECTL (hack/kubectl.sh, as `make test`
// sets it) or the one on PATH.
func render(t *testing.T, dir string) manifest {
	t.Helper()
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = missing.Tool(t, "kubectl", "run `make test` (hack/kubectl.sh builds one) or install kubectl")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", repoPath(dir))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return split(t, dir, out)
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
	var m manifest
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return m
		}
		if err != nil {
			t.Fatalf("split YAML of %s: %v", what, err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("decode a document of %s: %v", what, err)
		}
		if u.Object != nil {
			m = append(m, u)
		}
	}
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
