// Package manifests renders the operator's install manifests for tests: the kustomizations
// under config/ (kubectl kustomize) and the documents of any multi-document YAML, such as a
// Helm chart's rendering, as unstructured objects.
package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// Doc is one rendered document: its raw YAML and the object it decodes to.
type Doc struct {
	Raw    []byte
	Object *unstructured.Unstructured
}

// Kubectl is the kubectl the tests run: $KUBECTL (hack/kubectl.sh, as `make test` sets it)
// or the one on PATH. Without either the test fails under CI=true and skips elsewhere.
func Kubectl(t testing.TB) string {
	t.Helper()
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	return missing.Tool(t, "kubectl", "run `make test` (hack/kubectl.sh builds one) or install kubectl")
}

// Kustomize runs `kubectl kustomize dir` (dir relative to the repository, or absolute), as
// `kubectl apply -k` would render it, and returns its documents in order.
func Kustomize(t testing.TB, dir string) []Doc {
	t.Helper()
	kubectl := Kubectl(t)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(kube.RepoRoot(), filepath.FromSlash(dir))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	docs, err := Split(out)
	if err != nil {
		t.Fatalf("rendered YAML of %s: %v", dir, err)
	}
	return docs
}

// Split decodes a multi-document YAML stream, skipping empty documents.
func Split(data []byte) ([]Doc, error) {
	var docs []Doc
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if u.Object == nil {
			continue
		}
		docs = append(docs, Doc{Raw: doc, Object: u})
	}
}

// Objects are the decoded objects of docs, in order.
func Objects(docs []Doc) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(docs))
	for i := range docs {
		out[i] = docs[i].Object
	}
	return out
}
