package health_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
)

// cond is a condition as the API server returns it.
func cond(typ, st, reason string, gen int64) map[string]any {
	return map[string]any{"type": typ, "status": st, "reason": reason, "message": "m",
		"observedGeneration": gen, "lastTransitionTime": "2026-01-01T00:00:00Z"}
}

// policyObject is a RateLimitPolicy at generation 2 with the given status (none when nil).
func policyObject(st map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.ratelimit.dev/v1alpha1", "kind": "RateLimitPolicy",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "generation": int64(2)},
	}}
	if st != nil {
		u.Object["status"] = st
	}
	return u
}

// TestRules: the states the envtest tests do not reach cheaply, judged on objects built
// here: a snapshot over the ConfigMap budget (it takes about a megabyte of policies), an
// object with no status at all (a CRD older than the status default: kstatus cannot tell
// it from a finished one, the Lua can), and a Ready condition left from an older generation.
func TestRules(t *testing.T) {
	cases := []struct {
		name    string
		status  map[string]any
		kstatus status.Status
		argo    string
	}{
		{"snapshot too large", map[string]any{"observedGeneration": int64(2), "conditions": []any{
			cond("Published", "False", "SnapshotTooLarge", 2), cond("Ready", "False", "SnapshotTooLarge", 2),
			cond("Stalled", "True", "SnapshotTooLarge", 2)}}, status.FailedStatus, "Degraded"},
		{"no status (older CRD)", nil, status.CurrentStatus, "Progressing"},
		{"status defaulted, never reconciled", map[string]any{"observedGeneration": int64(0)}, status.InProgressStatus, "Progressing"},
		{"Ready of an older generation", map[string]any{"observedGeneration": int64(2), "conditions": []any{
			cond("Ready", "True", "Ready", 1)}}, status.CurrentStatus, "Progressing"},
		{"Ready unknown", map[string]any{"observedGeneration": int64(2), "conditions": []any{
			cond("Ready", "Unknown", "Unknown", 2)}}, status.InProgressStatus, "Progressing"},
		{"Redis away", map[string]any{"observedGeneration": int64(2), "conditions": []any{
			cond("ScriptsLoaded", "False", "RedisUnavailable", 2), cond("Published", "True", "Published", 2),
			cond("Ready", "True", "Ready", 2)}}, status.CurrentStatus, "Healthy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := judgeObject(t, policyObject(c.status))
			if err := h.expect(c.kstatus, c.argo); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestArgoCDComponent: config/argocd, as a kustomize Component of an Argo CD installation
// laid out as Argo CD documents it (its manifests without a namespace, the kustomization
// setting namespace: argocd), puts the health script, byte for byte, under the key Argo CD reads, in argocd-cm, and
// leaves the rest of argocd-cm alone.
func TestArgoCDComponent(t *testing.T) {
	dir := t.TempDir()
	component, err := filepath.Rel(dir, filepath.Join(kube.RepoRoot(), "config", "argocd"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"argocd-cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n  url: https://argocd.example.com\n",
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: argocd\nresources:\n  - argocd-cm.yaml\n" +
			"components:\n  - " + filepath.ToSlash(component) + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	docs := manifests.Kustomize(t, dir)
	if len(docs) != 1 {
		t.Fatalf("rendered %d documents, want argocd-cm alone", len(docs))
	}
	var cm struct {
		Metadata struct{ Name, Namespace string }
		Data     map[string]string
	}
	if err := yaml.Unmarshal(docs[0].Raw, &cm); err != nil {
		t.Fatalf("%v\n%s", err, docs[0].Raw)
	}
	script, err := os.ReadFile(filepath.Join(kube.RepoRoot(), filepath.FromSlash(healthScript)))
	if err != nil {
		t.Fatal(err)
	}
	const key = "resource.customizations.health.policy.ratelimit.dev_RateLimitPolicy"
	if cm.Metadata.Name != "argocd-cm" || cm.Metadata.Namespace != "argocd" {
		t.Errorf("rendered %s/%s, want argocd/argocd-cm (no name suffix)", cm.Metadata.Namespace, cm.Metadata.Name)
	}
	if cm.Data[key] != string(script) {
		t.Errorf("argocd-cm %s differs from %s:\n%s", key, healthScript, cm.Data[key])
	}
	if cm.Data["url"] != "https://argocd.example.com" {
		t.Errorf("argocd-cm lost its own data: %v", cm.Data)
	}
}

// TestDocsCopy: the argocd-cm snippet of docs/gitops.md carries the shipped script exactly.
func TestDocsCopy(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(kube.RepoRoot(), filepath.FromSlash(healthScript)))
	if err != nil {
		t.Fatal(err)
	}
	const key = "resource.customizations.health.policy.ratelimit.dev_RateLimitPolicy"
	found := false
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if !strings.Contains(block, key+":") {
			continue
		}
		found = true
		var cm struct{ Data map[string]string }
		if err := yaml.Unmarshal([]byte(block), &cm); err != nil {
			t.Fatalf("docs/gitops.md: %v", err)
		}
		if cm.Data[key] != string(script) {
			t.Errorf("docs/gitops.md: the argocd-cm copy differs from %s; copy it again", healthScript)
		}
	}
	if !found {
		t.Errorf("docs/gitops.md has no argocd-cm snippet with %s", key)
	}
}
