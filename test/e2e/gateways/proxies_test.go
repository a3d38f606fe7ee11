package gateways_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// installHint says how to get the proxies.
const installHint = "run `make proxies` (hack/proxies.sh installs Debian's caddy and nginx-light)"

// startCaddy runs the shipped Caddyfile with real Caddy in front of r, serving servedHosts
// on a free loopback port, and returns its address. The Caddyfile reads its settings from the
// environment.
func startCaddy(t *testing.T, r *rig) string {
	t.Helper()
	bin := missing.Tool(t, "caddy", installHint)
	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(conf, []byte(repoFile(t, "config/gateways/caddy/Caddyfile")), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs, _ := startOnFreePorts(t, "caddy", 1, func(addrs []string) *exec.Cmd {
		_, port, _ := net.SplitHostPort(addrs[0])
		cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", conf)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
			"SERVED_HOSTS="+servedHosts, "LISTEN_PORT="+port, "BIND_HOST=127.0.0.1", "SIDECAR_ADDR="+r.fwdAuth, "UPSTREAM_ADDR="+r.upstream)
		return cmd
	}, listening)
	return addrs[0]
}

// startNginx runs the shipped nginx.conf, its placeholders replaced with servedHosts and r's
// addresses, with real nginx in front of r on a free loopback port, and returns its address.
func startNginx(t *testing.T, r *rig) string {
	t.Helper()
	shipped := repoFile(t, "config/gateways/nginx/nginx.conf")
	return runNginx(t, func(addr string) string {
		conf := strings.NewReplacer("${LISTEN_ADDR}", addr, "${SERVER_NAMES}", servedHosts, "${SIDECAR_ADDR}", r.fwdAuth,
			"${UPSTREAM_ADDR}", r.upstream).Replace(shipped)
		if strings.Contains(conf, "${") {
			t.Fatal("nginx.conf: a placeholder the test does not know")
		}
		return conf
	})
}

// runNginx runs real nginx with the configuration conf(addr) makes for a free loopback
// address, until the test ends, and returns that address.
func runNginx(t *testing.T, conf func(addr string) string) string {
	t.Helper()
	bin := nginxBinary(t)
	addrs, _ := startOnFreePorts(t, "nginx", 1, func(addrs []string) *exec.Cmd {
		dir := t.TempDir()
		// nginx's workers run as nobody under root: they must reach the prefix's temp paths.
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(path, []byte(conf(addrs[0])), 0o644); err != nil {
			t.Fatal(err)
		}
		return exec.Command(bin, "-p", dir, "-c", path, "-g", "daemon off;")
	}, listening)
	return addrs[0]
}

// nginxBinary is nginx from PATH or /usr/sbin, which a non-root PATH may lack.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	return missing.Tool(t, "nginx", installHint)
}
