package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// usage answers "why is quota-quinn getting 429s?" the way support staff would: a
// ServiceAccount bound to the usage-reader ClusterRole (config/rbac) in the demo namespace,
// its token in a kubeconfig of its own, and `kubectl ratelimit usage` (the plugin found on
// PATH by kubectl) against the manager's usage API. Nothing is spent by reading.
func (d *demo) usage(ctx context.Context) error {
	d.step("Usage: a support ServiceAccount runs `kubectl ratelimit usage` to see why quota-quinn gets 429s, and `top` for the heaviest callers")
	plugin, err := d.build(ctx, "cmd/kubectl-ratelimit")
	if err != nil {
		return err
	}
	ns := d.opts.namespace
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(controlplane.RepoRoot(), "config/rbac/usage_reader_role.yaml")},
		{"create", "serviceaccount", "support", "-n", ns},
		{"create", "rolebinding", "support-usage", "-n", ns, "--clusterrole=usage-reader-role", "--serviceaccount=" + ns + ":support"},
	} {
		if out, err := d.kubectl(ctx, nil, args...); err != nil {
			return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	token, err := d.kubectl(ctx, nil, "create", "token", "support", "-n", ns)
	if err != nil {
		return fmt.Errorf("kubectl create token: %w\n%s", err, token)
	}
	kcfg, err := d.supportKubeconfig(token)
	if err != nil {
		return err
	}
	d.say("$ KUBECONFIG=%s kubectl ratelimit usage -n %s demo-quota quota-quinn   # through the API server: no --server",
		kcfg, ns)
	out, err := d.plugin(ctx, kcfg, plugin, "usage", "-n", ns, "demo-quota", "quota-quinn")
	if err != nil {
		return fmt.Errorf("kubectl ratelimit usage: %w", err)
	}
	if !bytes.Contains(out, []byte("denied")) || !hasFields(string(out), "monthly", "3", "3", "0") {
		return fmt.Errorf("kubectl ratelimit usage did not show quota-quinn's 3 of 3 used:\n%s", out)
	}
	if err := d.certUsage(ctx, plugin); err != nil {
		return err
	}
	d.say("$ kubectl ratelimit top -n %s demo-api --n 3   # the callers under the most pressure", ns)
	out, err = d.plugin(ctx, kcfg, plugin, "top", "-n", ns, "demo-api", "--n", "3")
	if err != nil {
		return fmt.Errorf("kubectl ratelimit top: %w", err)
	}
	if !hasFields(string(out), "demo-api") || !bytes.Contains(out, []byte("DENIED")) {
		return fmt.Errorf("kubectl ratelimit top did not show demo-api's callers:\n%s", out)
	}
	d.done("usage: a support ServiceAccount with get on ratelimitpolicies/usage read quota-quinn's 3 of 3 used with kubectl ratelimit usage")
	d.done("usage: a client-certificate user read the same through the API server, with no --server, CA file or token")
	return d.grant(ctx, kcfg, plugin)
}

// plugin runs `kubectl ratelimit args...` with the kubeconfig kcfg (the plugin found on PATH
// by kubectl), which reaches the usage API through the API server, and shows its output.
func (d *demo) plugin(ctx context.Context, kcfg, plugin string, args ...string) ([]byte, error) {
	args = append([]string{"ratelimit"}, args...)
	cmd := exec.CommandContext(ctx, d.opts.kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kcfg, "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	d.sayBlock(strings.TrimRight(string(out), "\n"))
	return out, err
}

// grant unblocks quota-quinn the way support staff would: the support ServiceAccount, now
// also bound to the usage-editor ClusterRole (update on ratelimitpolicies/usage), runs
// `kubectl ratelimit grant` for 2 more this month; the sidecar admits quota-quinn again
// within its deny cache's hold (5 s), exactly twice, and the grant is an Event on the policy.
func (d *demo) grant(ctx context.Context, kcfg, plugin string) error {
	d.step("Grant: the support ServiceAccount, bound to usage-editor, runs `kubectl ratelimit grant` for 2 more; quota-quinn is admitted again")
	ns := d.opts.namespace
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(controlplane.RepoRoot(), "config/rbac/usage_editor_role.yaml")},
		{"create", "rolebinding", "support-grant", "-n", ns, "--clusterrole=usage-editor-role", "--serviceaccount=" + ns + ":support"},
	} {
		if out, err := d.kubectl(ctx, nil, args...); err != nil {
			return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	d.say("$ kubectl ratelimit grant -n %s demo-quota quota-quinn 2 --request-id demo-ticket-1 (as support)", ns)
	out, err := d.plugin(ctx, kcfg, plugin, "grant", "-n", ns, "demo-quota", "quota-quinn", "2", "--request-id", "demo-ticket-1")
	if err != nil {
		return fmt.Errorf("kubectl ratelimit grant: %w", err)
	}
	if !hasFields(string(out), "monthly", "3", "2", "2") {
		return fmt.Errorf("kubectl ratelimit grant did not give quota-quinn 2 of 3:\n%s", out)
	}
	took, codes, err := d.admittedAgain(ctx)
	if err != nil {
		return err
	}
	d.say("the sidecar's check API admitted quota-quinn on demo-quota again %s after the grant (a cached denial answers for at most 5 s); then %v",
		took.Round(10*time.Millisecond), codes)
	if len(codes) != 2 || codes[0] != http.StatusOK || codes[1] != http.StatusTooManyRequests {
		return fmt.Errorf("after a grant of 2 (one used when admitted again): %v, want 200 then 429", codes)
	}
	events, err := d.kubectl(ctx, nil, "get", "events.events.k8s.io", "-n", ns, "--field-selector", "reason=UsageGranted",
		"-o", "custom-columns=REASON:.reason,NOTE:.note")
	if err != nil {
		return fmt.Errorf("kubectl get events: %w\n%s", err, events)
	}
	if !strings.Contains(events, "system:serviceaccount:"+ns+":support") {
		return fmt.Errorf("no UsageGranted event by the support ServiceAccount:\n%s", events)
	}
	d.sayBlock(strings.TrimRight(events, "\n"))
	d.done("grant: kubectl ratelimit grant gave quota-quinn 2 more this month, admitted exactly twice, recorded as an Event")
	return nil
}

// checkAPI posts body to the sidecar's check API; the caller closes the answer's body.
func (d *demo) checkAPI(ctx context.Context, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.addrs.check+"/v1/check", strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("check request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("check API: %w", err)
	}
	return resp, nil
}

// admittedAgain asks the sidecar's check API about demo-quota alone for quota-quinn (the
// proxy would also count demo-api's 5 per 10 s) until a check is admitted (up to 15 s: a
// denial the sidecar cached answers for at most 5 s; a denied check debits nothing), then
// twice more; it returns how long the first took and the two codes.
func (d *demo) admittedAgain(ctx context.Context) (time.Duration, []int, error) {
	check := func() (int, error) {
		resp, err := d.checkAPI(ctx, `{"policy":"demo-quota","identity":"quota-quinn"}`)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	start := time.Now()
	for {
		code, err := check()
		if err != nil {
			return 0, nil, err
		}
		if code == http.StatusOK {
			break
		}
		if time.Since(start) > 15*time.Second {
			return 0, nil, fmt.Errorf("quota-quinn still denied 15 s after a grant: %d", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	var codes []int
	for range 2 {
		code, err := check()
		if err != nil {
			return 0, nil, err
		}
		codes = append(codes, code)
	}
	return took, codes, nil
}

// supportKubeconfig writes a kubeconfig for the support ServiceAccount's token.
func (d *demo) supportKubeconfig(token string) (string, error) {
	path := filepath.Join(d.dir, "support.kubeconfig")
	if err := controlplane.WriteTokenKubeconfig(d.env.Config, path, strings.TrimSpace(token), d.opts.namespace); err != nil {
		return "", fmt.Errorf("support kubeconfig: %w", err)
	}
	return path, nil
}

// certUsage reads the same usage as a client-certificate user (support-cert, a kubeconfig
// envtest issues from the cluster's CA), bound to the same ClusterRole: the API server
// authenticates it, the usage API reads the user from the front-proxy headers.
func (d *demo) certUsage(ctx context.Context, plugin string) error {
	ns := d.opts.namespace
	if out, err := d.kubectl(ctx, nil, "create", "rolebinding", "support-cert-usage", "-n", ns,
		"--clusterrole=usage-reader-role", "--user=support-cert"); err != nil {
		return fmt.Errorf("kubectl create rolebinding: %w\n%s", err, out)
	}
	user, err := d.env.Environment.ControlPlane.AddUser(envtest.User{Name: "support-cert"}, nil)
	if err != nil {
		return fmt.Errorf("client-certificate user: %w", err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("client-certificate kubeconfig: %w", err)
	}
	kcfg := filepath.Join(d.dir, "support-cert.kubeconfig")
	if err := os.WriteFile(kcfg, raw, 0o600); err != nil {
		return err
	}
	d.say("$ KUBECONFIG=%s kubectl ratelimit usage -n %s demo-quota quota-quinn   # a client-certificate user", kcfg, ns)
	out, err := d.plugin(ctx, kcfg, plugin, "usage", "-n", ns, "demo-quota", "quota-quinn")
	if err != nil {
		return fmt.Errorf("kubectl ratelimit usage as support-cert: %w", err)
	}
	if !hasFields(string(out), "monthly", "3", "3", "0") {
		return fmt.Errorf("kubectl ratelimit usage as support-cert did not show quota-quinn's 3 of 3 used:\n%s", out)
	}
	return nil
}

// hasFields reports whether a line of out begins with exactly these fields.
func hasFields(out string, fields ...string) bool {
	want := strings.Join(fields, " ")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == want {
			return true
		}
	}
	return false
}
