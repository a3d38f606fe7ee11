package gateways_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
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
	addr := wait.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", conf)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"SERVED_HOSTS="+servedHosts, "LISTEN_PORT="+port, "BIND_HOST=127.0.0.1", "SIDECAR_ADDR="+r.fwdAuth, "UPSTREAM_ADDR="+r.upstream)
	startProcess(t, "caddy", cmd)
	waitListening(t, "caddy", addr)
	return addr
}

// startNginx runs the shipped nginx.conf, its placeholders replaced with servedHosts and r's
// addresses, with real nginx in front of r on a free loopback port, and returns its address.
func startNginx(t *testing.T, r *rig) string {
	t.Helper()
	addr := wait.FreeAddr(t)
	conf := strings.NewReplacer("${LISTEN_ADDR}", addr, "${SERVER_NAMES}", servedHosts, "${SIDECAR_ADDR}", r.fwdAuth,
		"${UPSTREAM_ADDR}", r.upstream).Replace(repoFile(t, "config/gateways/nginx/nginx.conf"))
	if strings.Contains(conf, "${") {
		t.Fatal("nginx.conf: a placeholder the test does not know")
	}
	return runNginx(t, addr, conf)
}

// runNginx runs real nginx with the configuration conf, which listens on addr, until the
// test ends, and returns addr.
func runNginx(t *testing.T, addr, conf string) string {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	// nginx's workers run as nobody under root: they must reach the prefix's temp paths.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "nginx", exec.Command(bin, "-p", dir, "-c", path, "-g", "daemon off;"))
	waitListening(t, "nginx", addr)
	return addr
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

// waitListening waits until something accepts connections on addr.
func waitListening(t *testing.T, name, addr string) {
	t.Helper()
	wait.Eventually(t, startWait, name+" listening on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}
