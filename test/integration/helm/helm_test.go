package helm_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
)

// The release the tests render: its name holds the chart's, so the full name is the release
// name.
const (
	release   = "ratelimit-operator"
	namespace = "ratelimit-system"
	fullname  = "ratelimit-operator"
)

// Values files under testdata.
const (
	// mirrorValues mirror config/default (and config/sidecar in one namespace).
	mirrorValues = "testdata/mirror-default.yaml"
	// customValues switch on every optional part and set every manager flag.
	customValues = "testdata/custom.yaml"
	// offValues switch off what can be switched off (webhooks, secure metrics).
	offValues = "testdata/off.yaml"
)

// chartDir is the chart, in the repository.
func chartDir() string { return filepath.Join(kube.RepoRoot(), "charts", "ratelimit-operator") }

// runHelm runs helm with args and returns its standard output, or its error with stderr.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmPath(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Keep helm away from the user's config and any cluster.
	home := t.TempDir()
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home,
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	if err := cmd.Run(); err != nil {
		return stdout.String(), &helmError{err: err, args: args, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type helmError struct {
	err    error
	args   []string
	stderr string
}

func (e *helmError) Error() string {
	return "helm " + strings.Join(e.args, " ") + ": " + e.err.Error() + "\n" + e.stderr
}

// render is `helm template` of the chart with the values files (under this package) and
// --set arguments, CRDs included.
func render(t *testing.T, files []string, set ...string) objects {
	t.Helper()
	out, err := template(t, files, set...)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := manifests.Split([]byte(out))
	if err != nil {
		t.Fatalf("split helm template output: %v\n%s", err, out)
	}
	var objs objects
	for _, d := range docs {
		objs = append(objs, d.Object)
	}
	return objs
}

// template runs `helm template` and returns its output.
func template(t *testing.T, files []string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chartDir(), "--namespace", namespace, "--include-crds"}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", abs)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return runHelm(t, args...)
}

// objects are rendered objects, in order.
type objects []*unstructured.Unstructured

// find is the object of kind, namespace and name, or nil.
func (o objects) find(kind, ns, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetNamespace() == ns && u.GetName() == name {
			return u
		}
	}
	return nil
}

// get is the object of kind, namespace and name; the test fails without it.
func (o objects) get(t *testing.T, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := o.find(kind, ns, name)
	if u == nil {
		t.Fatalf("no %s %s/%s rendered (have %v)", kind, ns, name, o.names())
	}
	return u
}

// ofKind is every object of kind.
func (o objects) ofKind(kind string) objects {
	var out objects
	for _, u := range o {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func (o objects) names() []string {
	var out []string
	for _, u := range o {
		out = append(out, u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
	}
	return out
}

// typed decodes u into the Kubernetes type T, failing on an unknown field.
func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	into := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("decode %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return into
}
