package usage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usageapi"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// rig is one manager binary serving the usage API on loopback, its Redis and control plane.
type rig struct {
	env    *kube.Env
	rds    *redistest.Server
	addr   string // 127.0.0.1:port
	url    string // https://127.0.0.1:port
	caFile string // the usage API's self-signed tls.crt
	out    *proc.Buffer
	cmd    *exec.Cmd
}

// startRig runs the manager binary against the suite's control plane and a fresh Redis
// (started with opts), with the usage API on a free loopback port and its certificate
// written to a temp dir.
func startRig(t *testing.T, opts ...redistest.Option) *rig {
	t.Helper()
	return launchRig(t, t.TempDir(), nil, opts...)
}

// launchRig is startRig with the usage API's certificate in certDir (made self-signed there
// when absent) and more manager flags.
func launchRig(t *testing.T, certDir string, flags []string, opts ...redistest.Option) *rig {
	t.Helper()
	e := suite.Env(t)
	r := &rig{env: e, rds: redistest.StartServer(t, opts...), out: &proc.Buffer{}}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteKubeconfig(e.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	addr, probe := wait.FreeAddr(t), wait.FreeAddr(t)
	r.addr, r.url, r.caFile = addr, "https://"+addr, filepath.Join(certDir, "tls.crt")
	r.cmd = exec.Command(proc.MustBuild(t, "cmd/manager"), append([]string{"--kubeconfig", kubeconfig, "--webhooks=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", probe, "--redis-addrs", r.rds.Addr(),
		"--usage-bind-address", addr, "--usage-cert-dir", certDir}, flags...)...)
	cmd := r.cmd
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("manager output:\n%s", r.out.String())
		}
	})
	wait.Eventually(t, time.Minute, "usage API serving", func() error {
		if _, err := os.Stat(r.caFile); err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	return r
}

// stop ends the manager (by its PID) and waits for it.
func (r *rig) stop() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// client is an HTTPS client trusting the usage API's certificate.
func (r *rig) client(t *testing.T) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(r.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", r.caFile)
	}
	return &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// read asks the usage API for ns/policy's usage by identity with token ("" sends none); it
// returns the status and the decoded answer (or the error body).
func (r *rig) read(t *testing.T, token, ns, policy, identity string) (int, checkwire.Response, string) {
	t.Helper()
	u := fmt.Sprintf("%s/v1/namespaces/%s/ratelimitpolicies/%s/usage?identity=%s", r.url, ns, policy, url.QueryEscape(identity))
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.client(t).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %d, body: %v", u, resp.StatusCode, err)
	}
	var out checkwire.Response
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, out, string(body)
}

// policyName names the policy every test reads.
const policyName = "orders"

// policy creates policyName in ns, a TokenBucket policy of 5 per minute keyed by X-API-Key,
// and waits until its snapshot is published.
func (r *rig) policy(t *testing.T, ns string) {
	name := policyName
	t.Helper()
	p := policytest.New(ns, name, policytest.Limit("per-minute", 5, time.Minute))
	if err := r.env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "snapshot of "+ns+" holding "+name, func() error {
		set, err := r.set(ns)
		if err != nil {
			return err
		}
		if set.Rule(name) == nil {
			return fmt.Errorf("no %s yet", name)
		}
		return nil
	})
}

// set is ns's published snapshot, compiled as a sidecar compiles it.
func (r *rig) set(ns string) (*engine.Set, error) {
	var cm corev1.ConfigMap
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: snapshot.ConfigMapName}, &cm); err != nil {
		return nil, err
	}
	s := &engine.Store{Namespace: ns}
	if err := s.Load([]byte(cm.Data[snapshot.DataKey]), "test"); err != nil {
		return nil, err
	}
	return s.Current(), nil
}

// spend sends n requests of identity to ns's policyName as a sidecar of ns would decide them
// (its published snapshot, the same Redis), and returns how many were admitted.
func (r *rig) spend(t *testing.T, ns, identity string, n int) int {
	t.Helper()
	set, err := r.set(ns)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(r.rds.Client(), limiter.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	g := &engine.Engine{Store: &engine.Store{Namespace: ns}}
	g.SetLimiter(lim)
	admitted := 0
	for range n {
		if o := g.Decide(context.Background(), "test", set.Rule(policyName), engine.Check{Identity: identity, HasIdentity: true, Cost: 1}); o.Allowed {
			admitted++
		}
	}
	return admitted
}

// serviceAccount creates a ServiceAccount in ns, bound to a Role of rules when any, and
// returns a token of it from the TokenRequest API.
func (r *rig) serviceAccount(t *testing.T, ns, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	c := r.env.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	if len(rules) > 0 {
		must(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}))
		must(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}))
	}
	cs, err := kubernetes.NewForConfig(r.env.Config)
	must(err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	must(err)
	return tr.Status.Token
}

// usageRule grants verbs on ratelimitpolicies/usage (API group policy.ratelimit.dev: what the
// manager's SubjectAccessReview asks).
func usageRule(verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"ratelimitpolicies/usage"}, Verbs: verbs}
}

// aggregatedRule grants verbs on ratelimitpolicies/usage in the aggregated API group
// usage.ratelimit.dev: what kube-apiserver asks before it proxies a request to the manager.
func aggregatedRule(verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{usageapi.Group}, Resources: []string{"ratelimitpolicies/usage"}, Verbs: verbs}
}
