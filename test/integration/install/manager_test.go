package install

import (
	"context"
	"crypto/tls"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestManagerServesProbes runs the real manager binary against the envtest API server and
// checks that it answers /healthz and /readyz, guards /metrics with authentication, and stops
// cleanly on SIGTERM.
func TestManagerServesProbes(t *testing.T) {
	bin, kubeconfig := managerWithKubeconfig(t)
	probe, metrics := wait.FreeAddr(t), wait.FreeAddr(t)
	p := proc.Start(t, "manager", exec.Command(bin, "--kubeconfig", kubeconfig,
		"--health-probe-bind-address", probe, "--metrics-bind-address", metrics,
		"--webhooks=false", "--redis-addrs", "127.0.0.1:1"))

	for _, path := range []string{"/healthz", "/readyz"} {
		waitHTTP(t, p, "http://"+probe+path, http.StatusOK)
	}
	// Metrics are HTTPS and authenticated: an anonymous scrape is refused.
	waitHTTP(t, p, "https://"+metrics+"/metrics", http.StatusUnauthorized)

	if err := p.Stop(t, 30*time.Second); err != nil {
		t.Fatalf("manager exited with %v after SIGTERM", err)
	}
}

// TestManagerRejectsBadRedisFlags checks that a bad flag stops the manager with a message
// naming the flag, before it touches the cluster.
func TestManagerRejectsBadRedisFlags(t *testing.T) {
	bin := proc.MustBuild(t, "cmd/manager")
	cases := map[string][]string{
		"--redis-mode":        {"--redis-mode", "memcached"},
		"--redis-master-name": {"--redis-mode", "sentinel"},
		"--redis-addrs":       {"--redis-addrs", "a:1,b:2"},
		"--redis-db":          {"--redis-mode", "cluster", "--redis-db", "3"},
		// A grace of 0 would drop checks at every rotation; a period within the grace could
		// never be kept.
		"--redis-tenant-password-grace":  {"--redis-tenant-users", "--redis-tenant-password-grace", "0s"},
		"--redis-tenant-rotation-period": {"--redis-tenant-users", "--redis-tenant-rotation-period", "1m"},
		"--redis-tenant-secret-name":     {"--redis-tenant-users", "--redis-tenant-secret-name", "Not_A_Name"},
	}
	for flag, args := range cases {
		t.Run(flag, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if err == nil {
				t.Fatalf("manager accepted %v", args)
			}
			if !strings.Contains(string(out), flag) {
				t.Fatalf("error does not name %s:\n%s", flag, out)
			}
		})
	}
}

// waitHTTP polls url until it answers want, failing when the process exits or 60s pass.
func waitHTTP(t *testing.T, p *proc.Process, url string, want int) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// The metrics certificate is self-signed; this test checks auth, not the chain.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	wait.HTTPStatus(t, hc, url, want, 60*time.Second, p.Gone)
}

// TestManagerRefusesABadKeyPrefix: a key prefix that cannot keep namespaces apart (here one
// without the closing ':', so namespace "b" of prefix "a" and namespace "ab" of another
// would share keys) stops the manager at start-up, naming the flag.
func TestManagerRefusesABadKeyPrefix(t *testing.T) {
	bin, kubeconfig := managerWithKubeconfig(t)
	out, err := exec.Command(bin, "--kubeconfig", kubeconfig, "--health-probe-bind-address", wait.FreeAddr(t),
		"--metrics-bind-address", "0", "--webhooks=false", "--redis-addrs", "127.0.0.1:1", "--key-prefix", "rl").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--key-prefix") {
		t.Fatalf("manager with --key-prefix rl: err %v, output:\n%s\nwant an exit naming --key-prefix", err, out)
	}
}

// managerWithKubeconfig builds the manager and writes a kubeconfig for the envtest API server.
func managerWithKubeconfig(t *testing.T) (bin, kubeconfig string) {
	t.Helper()
	e := suite.Env(t)
	dir := t.TempDir()
	bin = proc.MustBuild(t, "cmd/manager")
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := kube.WriteKubeconfig(e.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return bin, kubeconfig
}
