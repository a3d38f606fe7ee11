package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// controlPlane starts kube-apiserver + etcd with the CRD and the webhook configurations.
func (d *demo) controlPlane(_ context.Context) error {
	d.step("Control plane: kube-apiserver + etcd (envtest), CRDs (ours, Gateway API's) and webhook configurations installed")
	gatewayCRDs, err := withGatewayAPI()
	if err != nil {
		return err
	}
	injection, err := withInjectionWebhook()
	if err != nil {
		return err
	}
	agg, err := d.withAggregation()
	if err != nil {
		return err
	}
	env, err := controlplane.Start(controlplane.WithWebhookConfigs, injection, gatewayCRDs, agg.Configure)
	if err != nil {
		return fmt.Errorf("control plane (run `make envtest` to build it): %w", err)
	}
	d.env = env
	d.kcfg = filepath.Join(d.dir, "kubeconfig")
	if err := controlplane.WriteKubeconfig(env.Config, d.kcfg); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	d.say("API server %s, kubeconfig %s", env.Config.Host, d.kcfg)
	return nil
}

// startRedis runs redis-server on a free loopback port, without persistence, with the
// default user off and the manager's administrative user (config/redis/acl.conf).
func (d *demo) startRedis(ctx context.Context) error {
	d.step("Redis: a local redis-server, default user off, the manager's admin user from config/redis/acl.conf")
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	d.addrs.redis = addr
	if d.adminPassword, err = newPassword(); err != nil {
		return err
	}
	d.redis, err = d.launchRedis()
	if err != nil {
		return err
	}
	if err := waitRedis(ctx, addr, d.adminPassword); err != nil {
		return err
	}
	out, _ := exec.Command("redis-server", "--version").Output() // only for display
	d.say("%s on %s", strings.Fields(string(out))[min(2, len(strings.Fields(string(out)))-1)], addr)
	return nil
}

func (d *demo) launchRedis() (*proc, error) {
	_, port, _ := net.SplitHostPort(d.addrs.redis)
	users, err := redisUserArgs(d.adminPassword)
	if err != nil {
		return nil, err
	}
	// Memory as docs/operations.md recommends for a Redis shared by tenants: policies report
	// CountersProtected=True.
	return d.startProc("redis", "redis-server", append([]string{"--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", d.dir,
		"--maxmemory", "256mb", "--maxmemory-policy", "noeviction", "--maxmemory-clients", "10%",
		"--client-output-buffer-limit", "normal 32mb 8mb 60", "--proto-max-bulk-len", "1mb"}, users...)...)
}

// restartRedis brings Redis back (for --stay).
func (d *demo) restartRedis(ctx context.Context) {
	p, err := d.launchRedis()
	if err == nil {
		d.redis = p
		_ = waitRedis(ctx, d.addrs.redis, d.adminPassword) // best effort: the explorer will see it either way
	}
}

// waitRedis waits until Redis accepts the administrative user.
func waitRedis(ctx context.Context, addr, password string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Username: adminUser, Password: password, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c.Do(ctx, "SCRIPT", "EXISTS", "0").Err() == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("redis-server did not answer on %s (run `make redis` to install it)", addr)
}

// startManager builds and runs the manager: controller + webhooks on envtest's serving certs.
func (d *demo) startManager(ctx context.Context) error {
	d.step("Manager: controller and admission webhooks (go build ./cmd/manager)")
	bin, err := d.build(ctx, "cmd/manager")
	if err != nil {
		return err
	}
	probes, err := freeAddr()
	if err != nil {
		return err
	}
	d.addrs.managerProbes = probes
	if d.addrs.usage, err = freeAddr(); err != nil {
		return err
	}
	api, usageCerts, err := d.usageServing()
	if err != nil {
		return err
	}
	w := d.env.Environment.WebhookInstallOptions
	admin := filepath.Join(d.dir, "creds-admin")
	if err := writeCreds(admin, adminUser, d.adminPassword); err != nil {
		return err
	}
	p, err := d.startProc("manager", bin, "--kubeconfig", d.kcfg, "--redis-addrs", d.addrs.redis,
		"--redis-credentials-path", admin, "--redis-tenant-users", "--redis-tenant-password-grace", "5s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", probes,
		"--webhook-host", w.LocalServingHost, "--webhook-port", strconv.Itoa(w.LocalServingPort),
		"--webhook-cert-dir", w.LocalServingCertDir, "--script-resync", "2s",
		"--usage-bind-address", d.addrs.usage, "--usage-cert-dir", usageCerts, "--usage-front-proxy",
		"--sidecar-injection", "--sidecar-image", sidecarImage)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	if err := waitHTTP(ctx, p, "http://"+probes+"/readyz", 60*time.Second); err != nil {
		return err
	}
	d.say("ready; webhooks on %s:%d; log %s", w.LocalServingHost, w.LocalServingPort, p.log)
	return d.registerUsage(ctx, api)
}

// startSidecar runs the sidecar as a reverse proxy in front of a tiny upstream, watching the
// namespace's snapshot through the API server; Redis comes from the snapshot.
func (d *demo) startSidecar(ctx context.Context) error {
	d.step("Sidecar: reverse proxy in front of a tiny upstream, snapshot watched through the API")
	if err := d.startUpstream(); err != nil {
		return err
	}
	bin, err := d.build(ctx, "cmd/sidecar")
	if err != nil {
		return err
	}
	creds, user, password, err := d.namespaceCreds(ctx, d.opts.namespace)
	if err != nil {
		return err
	}
	d.nsUser, d.nsPassword = user, password
	for _, a := range []*string{&d.addrs.proxy, &d.addrs.check, &d.addrs.grpc, &d.addrs.forwardAuth, &d.addrs.sidecarMetrics} {
		if *a, err = freeAddr(); err != nil {
			return err
		}
	}
	p, err := d.startProc("sidecar", bin, "--namespace", d.opts.namespace, "--snapshot-watch", "--kubeconfig", d.kcfg,
		"--redis-credentials-path", creds,
		"--upstream", "http://"+d.addrs.upstream, "--proxy-bind-address", d.addrs.proxy,
		"--http-bind-address", d.addrs.check, "--grpc-bind-address", d.addrs.grpc, "--forward-auth-bind-address", d.addrs.forwardAuth,
		"--metrics-bind-address", d.addrs.sidecarMetrics, "--drain-delay", "0s", "--redis-timeout", "500ms")
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	if err := waitHTTP(ctx, p, "http://"+d.addrs.sidecarMetrics+"/readyz", 60*time.Second); err != nil {
		return err
	}
	d.say("proxy http://%s → upstream http://%s; check API http://%s/v1/check; Envoy RLS %s", d.addrs.proxy,
		d.addrs.upstream, d.addrs.check, d.addrs.grpc)
	d.say("Redis as %s (the user the manager made for the namespace, from its Secret %s)", user, credsSecret)
	return nil
}

// startUpstream serves a one-line answer on loopback: the app behind the sidecar.
func (d *demo) startUpstream() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	d.addrs.upstream = l.Addr().String()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/llm") {
			llmAnswer(w, r)
			return
		}
		_, _ = fmt.Fprintf(w, "hello from the app: %s %s\n", r.Method, r.URL.Path)
	})}
	go func() { _ = srv.Serve(l) }() // ends with the process
	return nil
}
