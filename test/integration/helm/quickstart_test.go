package helm_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
)

// TestQuickStartCommands runs what the README's quick start tells a newcomer to run, as far
// as a cluster without a kubelet allows: its `helm install` line, turned into `helm
// template` with the same arguments, renders, and the Deployment its `rollout status` waits
// for is one the chart renders; the policy it shows is accepted by the API server (CRD schema,
// CEL, strict field validation). test/e2e/cluster runs the rest (the chart's pods, the
// example app, traffic) on a real cluster.
func TestQuickStartCommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(readme))
	install, wait := quickStartInstall(t, blocks)
	for i, a := range install {
		if a == "charts/ratelimit-operator" { // relative to the repository, where the README runs it
			install[i] = chartDir()
		}
	}
	out, err := runHelm(t, append([]string{"template"}, install[2:]...)...)
	if err != nil {
		t.Fatalf("the quick start's helm install does not render: %v", err)
	}
	docs, err := manifests.Split([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	var objs objects
	for _, d := range docs {
		objs = append(objs, d.Object)
	}
	ns, name := wait[0], wait[1]
	if objs.find("Deployment", ns, name) == nil {
		t.Errorf("the quick start waits for deploy/%s in %s; the chart renders Deployments %v", name, ns, objs.ofKind("Deployment").names())
	}
	policy := quickStartPolicy(t, blocks)
	e := env(t)
	ensureNamespace(t, e.Client, policy.GetNamespace())
	if err := e.Client.Create(context.Background(), policy, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
		t.Errorf("the quick start's policy is refused: %v", err)
	}
}

// fencedBlocks are the bodies of a Markdown document's fenced code blocks, with their info
// strings ("sh", "yaml").
func fencedBlocks(md string) [][2]string {
	var blocks [][2]string
	for _, m := range regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```").FindAllStringSubmatch(md, -1) {
		blocks = append(blocks, [2]string{m[1], m[2]})
	}
	return blocks
}

// quickStartInstall is the README's `helm install` command split into words (backslash
// continuations joined, single quotes removed), and the namespace and name of the Deployment
// its `kubectl rollout status` line waits for.
func quickStartInstall(t *testing.T, blocks [][2]string) (args, wait []string) {
	t.Helper()
	waitRe := regexp.MustCompile(`kubectl -n (\S+) rollout status deploy/(\S+)`)
	for _, b := range blocks {
		if b[0] != "sh" || !strings.Contains(b[1], "helm install") {
			continue
		}
		line := strings.ReplaceAll(b[1], "\\\n", " ")
		for _, l := range strings.Split(line, "\n") {
			if strings.HasPrefix(l, "helm install ") {
				args = strings.Fields(strings.ReplaceAll(l, "'", ""))
			}
			if m := waitRe.FindStringSubmatch(l); m != nil {
				wait = m[1:]
			}
		}
	}
	if len(args) < 3 || wait == nil {
		t.Fatalf("README.md: no quick start block with `helm install` and `kubectl -n NS rollout status deploy/NAME`")
	}
	return args, wait
}

// quickStartPolicy is the README's first YAML block that is a RateLimitPolicy.
func quickStartPolicy(t *testing.T, blocks [][2]string) *unstructured.Unstructured {
	t.Helper()
	for _, b := range blocks {
		if b[0] != "yaml" || !strings.Contains(b[1], "kind: RateLimitPolicy") {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(b[1]), &u.Object); err != nil {
			t.Fatalf("README.md's policy: %v", err)
		}
		return u
	}
	t.Fatal("README.md has no RateLimitPolicy in a yaml block")
	return nil
}
