package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// usage answers "why is quota-quinn getting 429s?" the way support staff would: a
// ServiceAccount bound to the usage-reader ClusterRole (config/rbac) in the demo namespace,
// its token in a kubeconfig of its own, and `kubectl ratelimit usage` (the plugin found on
// PATH by kubectl) against the manager's usage API. Nothing is spent by reading.
func (d *demo) usage(ctx context.Context) error {
	d.step("Usage: a support ServiceAccount runs `kubectl ratelimit usage` to see why quota-quinn gets 429s")
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
	d.say("$ KUBECONFIG=%s kubectl ratelimit usage -n %s demo-quota quota-quinn --server %s --certificate-authority %s",
		kcfg, ns, d.usageURL(), d.usageCA())
	cmd := exec.CommandContext(ctx, d.opts.kubectl, "ratelimit", "usage", "-n", ns, "demo-quota", "quota-quinn",
		"--server", d.usageURL(), "--certificate-authority", d.usageCA())
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kcfg, "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	d.sayBlock(strings.TrimRight(string(out), "\n"))
	if err != nil {
		return fmt.Errorf("kubectl ratelimit usage: %w", err)
	}
	if !bytes.Contains(out, []byte("denied")) || !hasFields(string(out), "monthly", "3", "3", "0") {
		return fmt.Errorf("kubectl ratelimit usage did not show quota-quinn's 3 of 3 used:\n%s", out)
	}
	d.done("usage: a support ServiceAccount with get on ratelimitpolicies/usage read quota-quinn's 3 of 3 used with kubectl ratelimit usage")
	return nil
}

// supportKubeconfig writes a kubeconfig for the support ServiceAccount's token.
func (d *demo) supportKubeconfig(token string) (string, error) {
	path := filepath.Join(d.dir, "support.kubeconfig")
	if err := controlplane.WriteTokenKubeconfig(d.env.Config, path, strings.TrimSpace(token), d.opts.namespace); err != nil {
		return "", fmt.Errorf("support kubeconfig: %w", err)
	}
	return path, nil
}

// usageURL is the manager's usage API; usageCA the certificate it made for itself.
func (d *demo) usageURL() string { return "https://" + d.addrs.usage }
func (d *demo) usageCA() string  { return filepath.Join(d.dir, "usage-tls", "tls.crt") }

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
