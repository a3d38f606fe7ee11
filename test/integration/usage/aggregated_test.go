package usage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usageapi"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
)

// aggregatedRig is a rig whose manager also serves the usage API through the suite's
// kube-apiserver: --usage-front-proxy, a serving certificate for the APIService's Service
// name, and the APIService v1alpha1.usage.ratelimit.dev registered and Available.
type aggregatedRig struct {
	*rig
	api *controlplane.APIService
}

// startAggregatedRig starts the manager and registers its usage API as an APIService, an
// ExternalName Service naming localhost at the manager's port (there is no kube-proxy).
func startAggregatedRig(t *testing.T) *aggregatedRig {
	t.Helper()
	certDir := t.TempDir()
	api, err := controlplane.NewAPIService(usageapi.Group, usageapi.Version, "ratelimit-system", "ratelimit-operator-usage", certDir)
	if err != nil {
		t.Fatal(err)
	}
	r := launchRig(t, certDir, []string{"--usage-front-proxy"})
	api.Addr = r.addr
	ctx := context.Background()
	if err := api.Register(ctx, r.env.Client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Unregister(context.Background(), r.env.Client) })
	if err := api.Available(ctx, r.env.Client, time.Minute); err != nil {
		t.Fatal(err)
	}
	return &aggregatedRig{rig: r, api: api}
}

// apiPlugin returns a runner of the plugin binary as a user with the kubeconfig *kubeconfig
// and nothing else: no --server, --certificate-authority or --token, no
// $RATELIMIT_USAGE_SERVER. Its combined output and exit status.
func apiPlugin(t *testing.T, kubeconfig *string) func(args ...string) (string, int) {
	t.Helper()
	return binaryRunner(t, proc.MustBuild(t, "cmd/kubectl-ratelimit"), func() []string { return []string{"--kubeconfig", *kubeconfig} })
}

// binaryRunner runs bin with prefix()'s arguments first, without $RATELIMIT_USAGE_SERVER.
func binaryRunner(t *testing.T, bin string, prefix func() []string) func(args ...string) (string, int) {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RATELIMIT_USAGE_SERVER=") {
			env = append(env, kv)
		}
	}
	return func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append(prefix(), args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		}
		t.Fatalf("run %v: %v", args, err)
		return "", -1
	}
}

// certificateUser writes a kubeconfig whose user authenticates with a client certificate
// envtest's CA signed for name (no token at all), bound in ns to a Role of rules.
func (r *aggregatedRig) certificateUser(t *testing.T, ns, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	u, err := r.env.Environment.AddUser(envtest.User{Name: name}, rest.CopyConfig(r.env.Config))
	if err != nil {
		t.Fatal(err)
	}
	cfg := u.Config()
	if len(cfg.CertData) == 0 || cfg.BearerToken != "" {
		t.Fatalf("user %s: want a client certificate and no token", name)
	}
	r.bind(t, ns, name, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}, rules)
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := kube.WriteKubeconfig(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenUser writes a kubeconfig whose user is a ServiceAccount name of ns, by its token,
// bound to a Role of rules.
func (r *aggregatedRig) tokenUser(t *testing.T, ns, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := kube.WriteTokenKubeconfig(r.env.Config, path, r.serviceAccount(t, ns, name, rules...), ns); err != nil {
		t.Fatal(err)
	}
	return path
}

// bind creates a Role of rules in ns and binds who to it.
func (r *aggregatedRig) bind(t *testing.T, ns, name string, who rbacv1.Subject, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if err := r.env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	if err := r.env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{who}}); err != nil {
		t.Fatal(err)
	}
}

// TestPluginThroughTheAPIServer: with the usage API registered as an APIService (Available),
// the plugin binary with a kubeconfig alone (no --server, --certificate-authority or --token)
// explains alice's 429s, as a client-certificate user and as a ServiceAccount-token user
// with RBAC in both API groups; top works; a grant works for an editor and admits alice again;
// a reader's grant, a user with the grant of one API group only (either one), and a user with
// none are refused with 403s that say which check refused; kubectl get --raw reads usage and
// the discovery document through the API server.
func TestPluginThroughTheAPIServer(t *testing.T) {
	r := startAggregatedRig(t)
	a, b := kube.NewNamespace(t, r.env, "agg-a-"), kube.NewNamespace(t, r.env, "agg-b-")
	r.policy(t, a)
	r.policy(t, b)
	if got := r.spend(t, a, "alice", 7); got != 5 {
		t.Fatalf("alice: %d of 7 admitted by 5 per minute", got)
	}
	var kubeconfig string
	run := apiPlugin(t, &kubeconfig)
	readers := map[string]string{
		"client certificate":   r.certificateUser(t, a, "carol", usageRule("get"), aggregatedRule("get")),
		"ServiceAccount token": r.tokenUser(t, a, "support", usageRule("get"), aggregatedRule("get")),
	}
	for kind, path := range readers {
		kubeconfig = path
		readAs(t, kind, a, b, run)
	}
	if !strings.Contains(r.out.String(), `"user":"carol"`) {
		t.Errorf("the manager did not log carol's read (the user the API server named):\n%s", r.out.String())
	}
	kubeconfig = readers["client certificate"]
	out, code := run("grant", "-n", a, "orders", "alice", "2")
	if code != 1 || !kube.ContainsAll(out, []string{"403 Forbidden", `cannot create resource "ratelimitpolicies/usage" in API group "usage.ratelimit.dev"`}) {
		t.Fatalf("grant by a reader: exit %d:\n%s", code, out)
	}
	oneGroupOnly(t, r, a, &kubeconfig, run)
	kubeconfig = r.certificateUser(t, a, "lead", usageRule("get", "update"), aggregatedRule("get", "create"))
	out, code = run("grant", "-n", a, "orders", "alice", "2", "--request-id", "ticket-9")
	t.Logf("kubectl ratelimit grant orders alice 2, as a client-certificate editor:\n%s", out)
	if code != 0 || !kube.ContainsAll(out, []string{"granted 2", "orders"}) {
		t.Fatalf("grant by an editor: exit %d:\n%s", code, out)
	}
	if got := r.spend(t, a, "alice", 4); got < 2 || got > 3 {
		t.Fatalf("alice after a grant of 2: %d of 4 admitted, want 2 (3 if a token refilled)", got)
	}
	getRaw(t, readers["client certificate"], a)
}

// readAs runs usage and top in namespace a (read: alice denied, 5 of 5 used) and usage in b
// (refused by the API server) as a reader of a in both API groups, of the kind named.
func readAs(t *testing.T, kind, a, b string, run func(args ...string) (string, int)) {
	t.Helper()
	out, code := run("usage", "-n", a, "orders", "alice")
	t.Logf("kubectl ratelimit usage -n %s orders alice, as a %s user:\n%s", a, kind, out)
	if code != 0 || !kube.ContainsAll(out, []string{"orders", "alice", "denied", "per-minute"}) || !hasRow(out, "per-minute", "5", "5", "0") {
		t.Fatalf("%s: exit %d:\n%s", kind, code, out)
	}
	out, code = run("top", "-n", a, "orders")
	if code != 0 || !kube.ContainsAll(out, []string{"orders", "1 (100.0%)"}) {
		t.Fatalf("%s: top: exit %d:\n%s", kind, code, out)
	}
	out, code = run("usage", "-n", b, "orders", "alice")
	if code != 1 || !kube.ContainsAll(out, []string{"403 Forbidden", usageapi.Group, b}) {
		t.Fatalf("%s: namespace B: exit %d:\n%s", kind, code, out)
	}
}

// oneGroupOnly: RBAC in one of the two API groups is not enough. Without usage.ratelimit.dev
// the API server refuses (and the request never reaches the manager); without
// policy.ratelimit.dev the manager does; without either, the API server does.
func oneGroupOnly(t *testing.T, r *aggregatedRig, ns string, kubeconfig *string, run func(args ...string) (string, int)) {
	t.Helper()
	for _, tc := range []struct {
		user  string
		rules []rbacv1.PolicyRule
		want  []string
	}{
		{"old-style", []rbacv1.PolicyRule{usageRule("get")},
			[]string{"403 Forbidden", `User "old-style" cannot get resource "ratelimitpolicies/usage" in API group "usage.ratelimit.dev"`, "two API groups"}},
		{"aggregated-only", []rbacv1.PolicyRule{aggregatedRule("get")},
			[]string{"403 Forbidden", "aggregated-only may not get ratelimitpolicies/usage", "API group policy.ratelimit.dev"}},
		{"nobody", nil, []string{"403 Forbidden", `User "nobody" cannot get resource "ratelimitpolicies/usage"`}},
	} {
		*kubeconfig = r.certificateUser(t, ns, tc.user, tc.rules...)
		out, code := run("usage", "-n", ns, "orders", "alice")
		if code != 1 || !kube.ContainsAll(out, tc.want) {
			t.Errorf("%s: exit %d:\n%s\nwant %q", tc.user, code, out, tc.want)
		}
	}
}

// getRaw: kubectl get --raw, as a client-certificate user, reads bob's usage and the group
// version's discovery document through the API server.
func getRaw(t *testing.T, kubeconfig, ns string) {
	t.Helper()
	kubectl := manifests.Kubectl(t)
	for path, want := range map[string][]string{
		usageapi.AggregatedPrefix + "/namespaces/" + ns + "/ratelimitpolicies/orders/usage?identity=bob": {`"allowed":true`, `"remaining":5`},
		usageapi.AggregatedPrefix: {`"kind":"APIResourceList"`, `"name":"ratelimitpolicies/usage"`, `"namespaced":true`},
	} {
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "--raw", path).CombinedOutput()
		if err != nil || !kube.ContainsAll(string(out), want) {
			t.Errorf("kubectl get --raw %s: %v\n%s", path, err, out)
		}
	}
}

// TestForgedHeadersToTheManagerRefused: X-Remote-User and X-Remote-Group sent straight to the
// manager's port, over TLS without the front proxy's client certificate, are not believed:
// 401, and no usage is read (the answer holds no limit); the discovery document alike.
func TestForgedHeadersToTheManagerRefused(t *testing.T) {
	r := startAggregatedRig(t)
	ns := kube.NewNamespace(t, r.env, "forged-")
	r.policy(t, ns)
	for _, path := range []string{
		usageapi.AggregatedPrefix + "/namespaces/" + ns + "/ratelimitpolicies/orders/usage?identity=alice",
		usageapi.LegacyPrefix + "/namespaces/" + ns + "/ratelimitpolicies/orders/usage?identity=alice",
		usageapi.AggregatedPrefix,
	} {
		req, err := http.NewRequest(http.MethodGet, r.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Remote-User", "system:admin")
		req.Header.Set("X-Remote-Group", "system:masters")
		resp, err := r.client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := new(strings.Builder)
		_, _ = io.Copy(body, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body.String(), "limits") || strings.Contains(body.String(), "remaining") {
			t.Errorf("%s: %d %s; want 401 and nothing read", path, resp.StatusCode, body)
		}
	}
	if strings.Contains(r.out.String(), `"usage read"`) {
		t.Errorf("the manager logged a usage read:\n%s", r.out.String())
	}
}

// TestAPIServerRefusalsNamed: through the API server, a usage server that is down is a 503
// the plugin explains (is the manager running?), and a missing APIService a 404 it explains
// (how to register it, or --server).
func TestAPIServerRefusalsNamed(t *testing.T) {
	r := startAggregatedRig(t)
	ns := kube.NewNamespace(t, r.env, "down-")
	kubeconfig := r.tokenUser(t, ns, "support", usageRule("get"), aggregatedRule("get"))
	run := apiPlugin(t, &kubeconfig)
	r.stop()
	out, code := run("usage", "orders", "alice")
	if code != 1 || !kube.ContainsAll(out, []string{"503 Service Unavailable", "is the manager running?", "kubectl get apiservice v1alpha1.usage.ratelimit.dev"}) {
		t.Errorf("manager down: exit %d:\n%s", code, out)
	}
	if err := r.api.Unregister(context.Background(), r.env.Client); err != nil {
		t.Fatal(err)
	}
	var last string
	ok := waitFor(30*time.Second, func() bool {
		out, code = run("usage", "orders", "alice")
		last = out
		return code == 1 && strings.Contains(out, "404 Not Found")
	})
	if !ok || !kube.ContainsAll(last, []string{"no APIService v1alpha1.usage.ratelimit.dev", "usageApi.apiService.enabled", "--server"}) {
		t.Errorf("no APIService: exit %d:\n%s", code, last)
	}
}

// TestAPIServerPublishesFrontProxySettings: the suite's kube-apiserver, run with the
// front-proxy flags (controlplane.Aggregation), publishes them in
// kube-system/extension-apiserver-authentication, where the manager reads them.
func TestAPIServerPublishesFrontProxySettings(t *testing.T) {
	e := suite.Env(t)
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: usageapi.AuthenticationConfigMapNamespace, Name: usageapi.AuthenticationConfigMapName}
	if err := e.Client.Get(context.Background(), key, &cm); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"requestheader-client-ca-file":       string(e.Aggregation.CA.PEM),
		"requestheader-allowed-names":        `["` + controlplane.FrontProxyClientName + `"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	} {
		if got := cm.Data[k]; strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}

// waitFor polls cond every 200 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
