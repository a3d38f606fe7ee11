// Command sidecar enforces a namespace's RateLimitPolicy snapshot next to an app or a gateway:
// Envoy RLS v3 over gRPC, an HTTP JSON check API, forward auth for Caddy, Traefik and nginx,
// and a reverse proxy that answers 429.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/app"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/extauthz"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/forwardauth"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/grpcserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/proxy"
)

// options are the sidecar's command-line settings.
type options struct {
	namespace     string
	snapshotFile  string
	snapshotWatch bool
	grpcAddr      string
	httpAddr      string
	proxyAddr     string
	fwdAuthAddr   string
	fwdAuthCIDRs  string
	fwdAuthTrust  []netip.Prefix // fwdAuthCIDRs, parsed by check
	upstream      string
	metricsAddr   string
	pprof         bool
	timeout       time.Duration
	pipelining    bool
	denyCache     int
	drainDelay    time.Duration
	shutdownGrace time.Duration
	gcPercent     int
	http          httpserver.Limits
	redis         redisconn.Options
	zap           zap.Options
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace whose snapshot is enforced (default $POD_NAMESPACE); other namespaces' snapshots are refused.")
	fs.StringVar(&o.snapshotFile, "snapshot-file", "",
		"Path of the mounted snapshot (the ratelimit-snapshot ConfigMap's snapshot.json); reloaded on change.")
	fs.BoolVar(&o.snapshotWatch, "snapshot-watch", false,
		"Watch the ratelimit-snapshot ConfigMap through the API server instead of a mounted file.")
	fs.StringVar(&o.grpcAddr, "grpc-bind-address", "127.0.0.1:8081",
		"Address of the gRPC fronts, Envoy RLS v3 and Envoy ext_authz v3, on one port; empty disables them. Loopback by default: whoever reaches it can spend any caller's quota.")
	fs.StringVar(&o.httpAddr, "http-bind-address", "127.0.0.1:8080",
		"Address of the HTTP check API (POST /v1/check); empty disables it. Loopback by default: whoever reaches it can spend any caller's quota.")
	fs.StringVar(&o.fwdAuthAddr, "forward-auth-bind-address", "127.0.0.1:8082",
		"Address of forward auth (/v1/forward-auth for Caddy and Traefik, /v1/auth-request for nginx); empty disables it.")
	fs.StringVar(&o.fwdAuthCIDRs, "forward-auth-trusted-cidrs", "127.0.0.1/32,::1/128",
		"Comma-separated CIDRs of the proxies allowed to ask forward auth; other peers are answered 421, as they could state any request.")
	fs.StringVar(&o.proxyAddr, "proxy-bind-address", ":8000", "Address of the reverse proxy; used only with --upstream.")
	fs.StringVar(&o.upstream, "upstream", "", "URL of the app the reverse proxy forwards admitted requests to; empty disables the proxy.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9090", "Address of /metrics, /healthz and /readyz.")
	fs.BoolVar(&o.pprof, "pprof", false, "Serve /debug/pprof on the metrics address.")
	fs.DurationVar(&o.timeout, "redis-timeout", 50*time.Millisecond, "Longest wait for one Redis check before the failure mode decides.")
	fs.BoolVar(&o.pipelining, "pipelining", true, "Coalesce concurrent checks into Redis pipelines.")
	fs.IntVar(&o.denyCache, "deny-cache-size", 10000,
		"Answer known denials locally until their retry-after, remembering this many identities; 0 disables.")
	fs.DurationVar(&o.drainDelay, "drain-delay", 5*time.Second,
		"On SIGTERM, how long to stay serving while unready so endpoints stop sending traffic.")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", 10*time.Second, "Longest wait for in-flight requests on shutdown.")
	fs.IntVar(&o.gcPercent, "gc-percent", app.DefaultGCPercent,
		"Garbage-collection target (as GOGC): higher trades memory for CPU; the GOGC environment variable wins when set.")
	bindHTTPLimits(fs, &o.http)
	o.redis.BindFlags(fs)
	o.zap.BindFlags(fs)
}

// bindHTTPLimits binds the bounds of every HTTP listener (check API, reverse proxy, metrics).
func bindHTTPLimits(fs *flag.FlagSet, l *httpserver.Limits) {
	d := httpserver.DefaultLimits()
	fs.DurationVar(&l.ReadHeaderTimeout, "http-read-header-timeout", d.ReadHeaderTimeout,
		"HTTP listeners: longest time to read a request's line and headers.")
	fs.DurationVar(&l.ReadTimeout, "http-read-timeout", d.ReadTimeout,
		"HTTP listeners: longest time to read a whole request (check API, metrics); the proxy's longest wait for more of a request body.")
	fs.DurationVar(&l.WriteTimeout, "http-write-timeout", d.WriteTimeout,
		"HTTP listeners: longest time to write a whole answer (check API, metrics); the proxy's longest wait for the client to accept more of an answer.")
	fs.DurationVar(&l.IdleTimeout, "http-idle-timeout", d.IdleTimeout,
		"HTTP listeners: how long a keep-alive connection may wait for its next request; keep it above the idle timeout of the proxies in front.")
	fs.IntVar(&l.MaxHeaderBytes, "http-max-header-bytes", d.MaxHeaderBytes,
		"HTTP listeners: largest request line and header block; larger ones are answered 431.")
}

// check validates the flags, naming the one to fix, parses the forward-auth CIDRs, and
// returns the proxy's upstream (nil when the proxy is disabled).
func (o *options) check() (*url.URL, error) {
	if err := o.http.Validate(); err != nil {
		return nil, fmt.Errorf("--http-*: %w", err)
	}
	var err error
	if o.fwdAuthTrust, err = parseCIDRs(o.fwdAuthCIDRs); err != nil {
		return nil, fmt.Errorf("--forward-auth-trusted-cidrs: %w", err)
	}
	if (o.snapshotFile == "") == !o.snapshotWatch {
		return nil, errors.New("--snapshot-file or --snapshot-watch: exactly one snapshot source is required")
	}
	if o.snapshotWatch && o.namespace == "" {
		return nil, errors.New("--namespace: required with --snapshot-watch (or set $POD_NAMESPACE)")
	}
	if o.upstream == "" {
		return nil, nil
	}
	u, err := url.Parse(o.upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--upstream: %q is not an http(s) URL", o.upstream)
	}
	return u, nil
}

// parseCIDRs reads a comma-separated list of CIDRs; empty entries are skipped.
func parseCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// config is the app's configuration from the flags.
func (o *options) config(log logr.Logger) app.Config {
	return app.Config{
		Namespace:     o.namespace,
		SnapshotFile:  o.snapshotFile,
		MetricsAddr:   o.metricsAddr,
		Pprof:         o.pprof,
		HTTP:          o.http,
		Redis:         o.redis,
		Limiter:       limiter.Options{Timeout: o.timeout, Pipelining: o.pipelining, DenyCacheSize: o.denyCache},
		DrainDelay:    o.drainDelay,
		ShutdownGrace: o.shutdownGrace,
		Log:           log,
	}
}

// run wires the fronts the flags enable into the app and runs it until ctx ends.
func run(ctx context.Context, o options, log logr.Logger) error {
	upstream, err := o.check()
	if err != nil {
		return err
	}
	app.SetGCPercent(o.gcPercent)
	a := app.New(o.config(log))
	fronts := []app.Front{
		{Name: httpcheck.FrontName, Addr: o.httpAddr, Server: httpcheck.NewServer(a.Engine, o.http, log.WithName(httpcheck.FrontName))},
		{Name: "grpc", Addr: o.grpcAddr, Server: grpcserver.New(envoyrls.New(a.Engine, log.WithName("envoy")), extauthz.New(a.Engine, log.WithName("extauthz")))},
		{Name: forwardauth.FrontName, Addr: o.fwdAuthAddr, Server: forwardauth.NewServer(a.Engine, o.fwdAuthTrust, o.http, log.WithName("forwardauth"))},
	}
	if upstream != nil {
		fronts = append(fronts, app.Front{Name: proxy.FrontName, Addr: o.proxyAddr,
			Server: proxy.NewServer(a.Engine, upstream, o.http, log.WithName("proxy"))})
	}
	return a.Run(ctx, fronts...)
}

func main() {
	var o options
	o.bind(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("sidecar")
	if err := run(ctrl.SetupSignalHandler(), o, log); err != nil {
		log.Error(err, "sidecar exited")
		os.Exit(1)
	}
}
