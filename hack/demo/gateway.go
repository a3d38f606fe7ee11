package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// gateway runs a real Caddy with the shipped config/gateways/caddy/Caddyfile in front of the
// same upstream, asking the sidecar's forward auth, and sends a burst through it: the same
// policy as the reverse proxy's, enforced at a gateway.
func (d *demo) gateway(ctx context.Context) error {
	d.step("A gateway: real Caddy (config/gateways/caddy) asking the sidecar's forward auth")
	if err := d.startCaddy(ctx); err != nil {
		return err
	}
	codes, err := d.sendBurst(ctx, d.addrs.caddy, "carol")
	if err != nil {
		return err
	}
	if fmt.Sprint(codes) != "[200 200 200 200 200 429 429]" {
		return fmt.Errorf("burst through Caddy answered %v, want 5×200 then 429s", codes)
	}
	d.done("gateway: the same policy through real Caddy with forward auth, 200 ×5 then 429 with Retry-After")
	return nil
}

// startCaddy runs caddy with the shipped Caddyfile, its addresses from the environment. It
// serves the host the demo's client names it by, its loopback address.
func (d *demo) startCaddy(ctx context.Context) error {
	bin, err := exec.LookPath("caddy")
	if err != nil {
		return fmt.Errorf("caddy not found (run `make proxies` to install it): %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	d.addrs.caddy = addr
	_, port, _ := net.SplitHostPort(addr)
	home := filepath.Join(d.dir, "caddy")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("caddy home: %w", err)
	}
	conf := filepath.Join(controlplane.RepoRoot(), "config", "gateways", "caddy", "Caddyfile")
	p, err := d.startProcEnv("caddy", []string{"HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"SERVED_HOSTS=127.0.0.1", "LISTEN_PORT=" + port, "BIND_HOST=127.0.0.1", "SIDECAR_ADDR=" + d.addrs.forwardAuth, "UPSTREAM_ADDR=" + d.addrs.upstream},
		bin, "run", "--adapter", "caddyfile", "--config", conf)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	if err := waitTCP(ctx, p, addr, 20*time.Second); err != nil {
		return err
	}
	d.say("caddy http://%s → forward auth http://%s/v1/forward-auth → upstream http://%s; log %s",
		addr, d.addrs.forwardAuth, d.addrs.upstream, p.log)
	return nil
}
