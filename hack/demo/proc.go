package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// proc is a process the demo started; stop ends it by its PID.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// startProc runs bin with args, logging to <dir>/<name>.log.
func (d *demo) startProc(name, bin string, args ...string) (*proc, error) {
	return d.startProcEnv(name, nil, bin, args...)
}

// startProcEnv is startProc with env added to the demo's own environment.
func (d *demo) startProcEnv(name string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(d.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait() // the exit status is read through exited and ProcessState
		_ = f.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM to the PID, then SIGKILL after 10s.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// kill sends SIGKILL and waits.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// build compiles a command of this repository into the demo's directory.
func (d *demo) build(ctx context.Context, pkg string) (string, error) {
	bin := filepath.Join(d.dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+pkg)
	cmd.Dir = controlplane.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// freeAddr is a free loopback host:port.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	return waitUntil(ctx, p, url, timeout, func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// waitTCP waits until addr accepts connections (a probe request could spend quota).
func waitTCP(ctx context.Context, p *proc, addr string, timeout time.Duration) error {
	return waitUntil(ctx, p, addr, timeout, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}

// waitUntil polls ready every 100ms until it holds, failing when p exits, ctx ends or
// timeout passes; what names what is waited for.
func waitUntil(ctx context.Context, p *proc, what string, timeout time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited early; see %s", p.name, p.log)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		default:
		}
		if ready() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New(p.name + " not ready at " + what + " after " + timeout.String() + "; see " + p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
