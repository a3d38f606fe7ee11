package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// demo is one run: what it started (to stop it) and what it saw (for the summary).
type demo struct {
	opts  options
	start time.Time
	out   io.Writer
	dir   string
	env   *controlplane.Env
	agg   *controlplane.Aggregation
	kcfg  string
	redis *proc
	procs []*proc
	addrs addrs
	// adminPassword is the Redis administrative user's (the manager's); nsUser and
	// nsPassword are the credentials the manager wrote for the demo namespace's sidecar.
	adminPassword, nsUser, nsPassword string
	summary                           []string
	stepN                             int
}

// addrs are the loopback endpoints of the demo's servers.
type addrs struct {
	redis, proxy, check, grpc, forwardAuth, caddy, sidecarMetrics, managerProbes, upstream, usage string
}

const steps = 20

func (d *demo) run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "ratelimit-demo-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	d.dir = dir
	for _, s := range []func(context.Context) error{
		d.controlPlane, d.startRedis, d.startManager, d.applySamples, d.startSidecar,
		d.burst, d.plans, d.override, d.quota, d.usage, d.injection, d.llm, d.gateway, d.gatewayAPI, d.badPolicy, d.crossNamespace, d.tenancy, d.editPolicy, d.killRedis,
	} {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		if err := s(ctx); err != nil {
			return err
		}
	}
	d.printSummary()
	if d.opts.stay {
		d.explore(ctx)
	}
	return nil
}

// step starts a numbered step.
func (d *demo) step(title string) {
	d.stepN++
	d.printf("\n\033[1m▶ [%d/%d] %s\033[0m  (t=%s)\n", d.stepN, steps, title, d.elapsed())
}

// printf writes to the demo's output; a broken terminal is not worth stopping for.
func (d *demo) printf(format string, args ...any) { _, _ = fmt.Fprintf(d.out, format, args...) }

func (d *demo) elapsed() string { return time.Since(d.start).Round(100 * time.Millisecond).String() }

// say prints an indented line.
func (d *demo) say(format string, args ...any) {
	d.printf("    "+format+"\n", args...)
}

// done records a summary line.
func (d *demo) done(line string) { d.summary = append(d.summary, line) }

func (d *demo) printSummary() {
	d.printf("\n\033[1m✔ Summary\033[0m (%s)\n", d.elapsed())
	for _, s := range d.summary {
		d.printf("  • %s\n", s)
	}
}

// explore keeps everything up until Ctrl-C, with directions.
func (d *demo) explore(ctx context.Context) {
	d.restartRedis(ctx)
	d.printf("\nEverything is up (Redis restarted). Try:\n")
	d.printf("  export KUBECONFIG=%s\n", d.kcfg)
	d.printf("  %s get rlp -n %s\n", d.opts.kubectl, d.opts.namespace)
	d.printf("  curl -i -H 'X-API-Key: me' http://%s/\n", d.addrs.proxy)
	d.printf("  curl -i -H 'X-API-Key: me' http://%s/   # through Caddy, forward auth\n", d.addrs.caddy)
	d.printf("  curl -i -d '{\"policy\":\"demo-api\",\"identity\":\"me\"}' http://%s/v1/check\n", d.addrs.check)
	d.printf("  curl http://%s/metrics | grep ratelimit_sidecar\n", d.addrs.sidecarMetrics)
	d.printf("  KUBECONFIG=%s PATH=%s:$PATH %s ratelimit usage -n %s demo-quota quota-quinn\n",
		filepath.Join(d.dir, "support.kubeconfig"), d.dir, d.opts.kubectl, d.opts.namespace)
	d.printf("  logs: %s\n", filepath.Join(d.dir, "*.log"))
	d.printf("Ctrl-C stops everything.\n")
	<-ctx.Done()
}

// cleanup stops every process by PID, then the control plane.
func (d *demo) cleanup() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		d.procs[i].stop()
	}
	if d.redis != nil {
		d.redis.stop()
	}
	if d.env != nil {
		if err := d.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}
	d.agg.Remove()
	if d.dir != "" && !strings.Contains(os.Getenv("DEMO_KEEP"), "1") {
		_ = os.RemoveAll(d.dir) // best effort: a temp dir
	}
}
