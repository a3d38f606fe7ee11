package usage

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
)

// TestPluginAsAUserRunsIt: the kubectl-ratelimit binary, run as a user would run it with a
// kubeconfig whose user is a ServiceAccount token, against the manager binary's usage API:
// it explains alice's 429s in namespace A (5 of 5 used on per-minute, a wait of seconds),
// exits 0 for that answer, and exits 1 naming the refusal for namespace B.
func TestPluginAsAUserRunsIt(t *testing.T) {
	r := startRig(t)
	a, b := kube.NewNamespace(t, r.env, "plugin-a-"), kube.NewNamespace(t, r.env, "plugin-b-")
	r.policy(t, a)
	r.policy(t, b)
	if got := r.spend(t, a, "alice", 7); got != 5 {
		t.Fatalf("alice: %d of 7 admitted by 5 per minute", got)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteTokenKubeconfig(r.env.Config, kubeconfig, r.serviceAccount(t, a, "support", usageRule("get")), a); err != nil {
		t.Fatal(err)
	}
	run := r.plugin(t, &kubeconfig)
	out, code := run("usage", "orders", "alice")
	t.Logf("kubectl ratelimit usage orders alice (namespace %s from the kubeconfig):\n%s", a, out)
	if code != 0 || !kube.ContainsAll(out, []string{"orders", "alice", "denied", "per-minute"}) || !hasRow(out, "per-minute", "5", "5", "0") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = run("usage", "orders", "bob", "-o", "json")
	if code != 0 || !kube.ContainsAll(out, []string{`"allowed": true`, `"used": 0`, `"remaining": 5`}) {
		t.Fatalf("bob, json: exit %d:\n%s", code, out)
	}
	out, code = run("usage", "-n", b, "orders", "alice")
	if code != 1 || !kube.ContainsAll(out, []string{"403", "ratelimitpolicies/usage", b}) {
		t.Fatalf("namespace B: exit %d:\n%s", code, out)
	}
	out, code = run("grant", "orders", "alice", "2")
	if code != 1 || !kube.ContainsAll(out, []string{"403", "update"}) {
		t.Fatalf("grant by a reader: exit %d:\n%s", code, out)
	}
	pluginGrant(t, r, a, &kubeconfig, run)
}

// pluginGrant runs the plugin's grant as an editor of ns (get and update on
// ratelimitpolicies/usage): 2 granted to the exhausted alice, 2 of her requests admitted.
func pluginGrant(t *testing.T, r *rig, a string, kubeconfig *string, run func(args ...string) (string, int)) {
	t.Helper()
	editor := filepath.Join(t.TempDir(), "editor")
	if err := kube.WriteTokenKubeconfig(r.env.Config, editor, r.serviceAccount(t, a, "editor", usageRule("get", "update")), a); err != nil {
		t.Fatal(err)
	}
	*kubeconfig = editor
	out, code := run("grant", "orders", "alice", "2", "--request-id", "ticket-7")
	t.Logf("kubectl ratelimit grant orders alice 2:\n%s", out)
	if code != 0 || !kube.ContainsAll(out, []string{"granted 2", "orders"}) || !hasRow(out, "per-minute", "5") {
		t.Fatalf("grant by an editor: exit %d:\n%s", code, out)
	}
	if got := r.spend(t, a, "alice", 4); got < 2 || got > 3 {
		t.Fatalf("alice after a grant of 2: %d of 4 admitted, want 2 (3 if a token refilled)", got)
	}
}

// hasRow reports whether a line of out has exactly these fields.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// plugin builds the kubectl-ratelimit binary and returns a runner of it as a user with the
// kubeconfig *kubeconfig (read at each run), pointed at the rig's usage API with --server:
// its combined output and exit status.
func (r *rig) plugin(t *testing.T, kubeconfig *string, fixed ...string) func(args ...string) (string, int) {
	t.Helper()
	return binaryRunner(t, proc.MustBuild(t, "cmd/kubectl-ratelimit"), func() []string {
		return append([]string{"--kubeconfig", *kubeconfig, "--server", r.url, "--certificate-authority", r.caFile}, fixed...)
	})
}
