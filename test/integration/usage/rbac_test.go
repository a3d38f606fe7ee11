package usage

import (
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// TestUsageReadUnderRBAC: alice has spent her 5 per minute in namespace A and was denied
// once. A ServiceAccount of A granted only get on ratelimitpolicies/usage in A reads why:
// 429, 5 of 5 used, the wait to her next token; bob, untouched, reads 0 used. The same
// token is refused (403) on B's policy of the same name, whether or not the policy exists,
// and so is every token without the grant: one of A with get on ratelimitpolicies but not on
// its usage subresource, one of A with no role, one of B granted in B only. No token, or a
// forged one, is 401. Twenty reads later alice's and bob's counts are where they were.
func TestUsageReadUnderRBAC(t *testing.T) {
	r := startRig(t)
	a, b := kube.NewNamespace(t, r.env, "usage-a-"), kube.NewNamespace(t, r.env, "usage-b-")
	r.policy(t, a)
	r.policy(t, b)
	if got := r.spend(t, a, "alice", 6); got != 5 {
		t.Fatalf("alice: %d of 6 admitted by 5 per minute", got)
	}
	support := r.serviceAccount(t, a, "support", usageRule("get"))
	policyReader := r.serviceAccount(t, a, "policy-reader", rbacv1.PolicyRule{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"ratelimitpolicies"}, Verbs: []string{"get", "list"}})
	nobody := r.serviceAccount(t, a, "nobody")
	supportB := r.serviceAccount(t, b, "support", usageRule("get"))

	for range 10 {
		readAlice(t, r, support, a)
	}
	code, bob, body := r.read(t, support, a, "orders", "bob")
	if code != http.StatusOK || bob.Limits[0].Used != 0 || bob.Limits[0].Remaining != 5 {
		t.Fatalf("bob in A: %d %s", code, body)
	}
	refused := []struct {
		what, token, ns, policy string
		code                    int
	}{
		{"A's support on B's policy", support, b, "orders", http.StatusForbidden},
		{"A's support on a policy B does not have", support, b, "missing", http.StatusForbidden},
		{"get on ratelimitpolicies without usage", policyReader, a, "orders", http.StatusForbidden},
		{"a ServiceAccount without a role", nobody, a, "orders", http.StatusForbidden},
		{"B's support on A", supportB, a, "orders", http.StatusForbidden},
		{"no token", "", a, "orders", http.StatusUnauthorized},
		{"a forged token", support[:len(support)-4] + "AAAA", a, "orders", http.StatusUnauthorized},
		{"A's support on a policy A does not have", support, a, "missing", http.StatusNotFound},
	}
	for _, c := range refused {
		code, _, body := r.read(t, c.token, c.ns, c.policy, "alice")
		if code != c.code || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s, want %d with an error", c.what, code, body, c.code)
		}
		if strings.Contains(body, support) || c.token != "" && strings.Contains(body, c.token) {
			t.Errorf("%s: the answer quotes the token", c.what)
		}
	}
	for range 10 {
		readAlice(t, r, support, a)
	}
	if got := r.spend(t, a, "bob", 6); got != 5 {
		t.Errorf("bob after 20 reads: %d of 6 admitted, want 5", got)
	}
	if got := r.spend(t, b, "alice", 6); got != 5 {
		t.Errorf("alice in B: %d of 6 admitted, want 5 (A's counters are A's)", got)
	}
	requireReadsLogged(t, r, "system:serviceaccount:"+a+":support", "alice", "bob")
}

// requireReadsLogged requires the manager's log to hold each read with its reader and
// none of the identities read.
func requireReadsLogged(t *testing.T, r *rig, reader string, identities ...string) {
	t.Helper()
	log := r.out.String()
	if !strings.Contains(log, `"usage read"`) || !strings.Contains(log, reader) {
		t.Errorf("manager log: no usage read by %s in %d bytes", reader, len(log))
	}
	for _, id := range identities {
		if strings.Contains(log, id) {
			t.Errorf("manager log names the identity %q", id)
		}
	}
}

// readAlice reads alice's usage in ns as token and requires what 5 of 5 spent reads.
func readAlice(t *testing.T, r *rig, token, ns string) {
	t.Helper()
	code, got, body := r.read(t, token, ns, "orders", "alice")
	if code != http.StatusTooManyRequests || !got.Peek || len(got.Limits) != 1 {
		t.Fatalf("alice in A: %d %s", code, body)
	}
	l := got.Limits[0]
	if l.Name != "per-minute" || l.Quota != 5 || l.Used != 5 || l.Remaining != 0 || l.RetryAfterMs <= 0 || l.RetryAfterMs > 12000 {
		t.Fatalf("alice in A: %+v", l)
	}
}
