package usage

import (
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// TestExplainAsAUserRunsIt: `kubectl ratelimit explain`, the binary run with a kubeconfig
// whose user is a ServiceAccount allowed to get the snapshot ConfigMap and read usage, on
// the live snapshot and the manager's usage API: a request under /api with alice's key
// matches orders, read as alice, default tier, 5 per minute, and is denied after her 5
// (the peek debits nothing: bob is still allowed 5 after being explained); a path outside
// the match matches nothing; without get on the ConfigMap it fails naming it.
func TestExplainAsAUserRunsIt(t *testing.T) {
	r := startRig(t)
	a := kube.NewNamespace(t, r.env, "explain-")
	r.policy(t, a)
	if got := r.spend(t, a, "alice", 5); got != 5 {
		t.Fatalf("alice: %d of 5 admitted by 5 per minute", got)
	}
	snapshotRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{snapshot.ConfigMapName}, Verbs: []string{"get"}}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteTokenKubeconfig(r.env.Config, kubeconfig, r.serviceAccount(t, a, "support", usageRule("get"), snapshotRule), a); err != nil {
		t.Fatal(err)
	}
	run := r.plugin(t, &kubeconfig, "explain", "--host", "shop.example")
	out, code := run("--path", "/api/orders?x=1", "-H", "X-API-Key: alice")
	t.Logf("kubectl ratelimit explain (alice):\n%s", out)
	if code != 0 || !hasRow(out, "orders", "alice", "default", "1", "per-minute", "5/1m0s") ||
		!hasRow(out, "orders", "default", "alice", "denied") || !hasRow(out, "per-minute", "5", "5", "0") {
		t.Fatalf("alice: exit %d:\n%s", code, out)
	}
	for range 2 {
		out, code = run("--path", "/api/orders", "-H", "X-API-Key=bob", "-o", "json")
		if code != 0 || !kube.ContainsAll(out, []string{`"identity": "bob"`, `"allowed": true`, `"remaining": 5`}) {
			t.Fatalf("bob: exit %d:\n%s", code, out)
		}
	}
	out, code = run("--path", "/healthz", "-H", "X-API-Key: alice")
	if code != 0 || !strings.Contains(out, "No policy matches") {
		t.Fatalf("/healthz: exit %d:\n%s", code, out)
	}
	if err := kube.WriteTokenKubeconfig(r.env.Config, kubeconfig, r.serviceAccount(t, a, "reader", usageRule("get")), a); err != nil {
		t.Fatal(err)
	}
	out, code = run("--path", "/api/orders", "-H", "X-API-Key: alice")
	if code != 1 || !kube.ContainsAll(out, []string{"forbidden", snapshot.ConfigMapName}) {
		t.Fatalf("without get on the snapshot: exit %d:\n%s", code, out)
	}
}
