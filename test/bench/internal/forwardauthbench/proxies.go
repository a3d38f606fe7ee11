package forwardauthbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
)

// process is a proxy this package started, stopped by its PID.
type process struct {
	*proc.Process
	addr string
	dir  string
}

// stop sends SIGTERM, then SIGKILL after 5s, and removes the process's directory.
func (p *process) stop() {
	p.Halt(5 * time.Second)
	_ = os.RemoveAll(p.dir)
}

// start runs cmd as name and waits until addr accepts connections.
func start(name, addr, dir string, cmd *exec.Cmd) (*process, error) {
	pr, err := proc.Launch(name, cmd)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p := &process{Process: pr, addr: addr, dir: dir}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return p, nil
		}
		select {
		case <-p.Exited():
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("%s exited before listening: %s", name, p.Out.String())
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not listening on %s within 30s: %w", name, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// servedHost is the host the proxies serve: the bench's client names them by their loopback
// address.
const servedHost = "127.0.0.1"

// startCaddy runs the shipped Caddyfile with its environment pointing at front and upstream.
func startCaddy(ctx context.Context, root, front, upstream string) (*process, error) {
	bin, err := exec.LookPath("caddy")
	if err != nil {
		return nil, fmt.Errorf("caddy (make proxies): %w", err)
	}
	dir, addr, err := prepare()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.CommandContext(ctx, bin, "run", "--adapter", "caddyfile", "--config", filepath.Join(root, "config/gateways/caddy/Caddyfile"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"SERVED_HOSTS="+servedHost, "LISTEN_PORT="+port, "BIND_HOST=127.0.0.1", "SIDECAR_ADDR="+front, "UPSTREAM_ADDR="+upstream)
	return start("caddy", addr, dir, cmd)
}

// startNginx runs the shipped nginx.conf with its placeholders replaced.
func startNginx(ctx context.Context, root, front, upstream string) (*process, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			return nil, fmt.Errorf("nginx (make proxies): %w", err)
		}
		bin = "/usr/sbin/nginx"
	}
	dir, addr, err := prepare()
	if err != nil {
		return nil, err
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "config/gateways/nginx/nginx.conf"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("nginx.conf: %w", err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	text := strings.NewReplacer("${LISTEN_ADDR}", addr, "${SERVER_NAMES}", servedHost, "${SIDECAR_ADDR}", front,
		"${UPSTREAM_ADDR}", upstream).Replace(string(tmpl))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("nginx.conf: %w", err)
	}
	return start("nginx", addr, dir, exec.CommandContext(ctx, bin, "-p", dir, "-c", conf, "-g", "daemon off;"))
}

// prepare is a directory for a proxy (readable by nginx's workers) and a free loopback
// address for it to listen on.
func prepare() (dir, addr string, err error) {
	dir, err = os.MkdirTemp("", "forwardauthbench-")
	if err != nil {
		return "", "", fmt.Errorf("temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("temp dir: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("free port: %w", err)
	}
	addr = lis.Addr().String()
	_ = lis.Close()
	return dir, addr, nil
}

// repoRoot is the nearest directory upwards from the working directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "config/gateways")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("config/gateways not found above the working directory: set Config.RepoRoot")
		}
		dir = parent
	}
}
