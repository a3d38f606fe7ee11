// Command manager runs the ratelimit-operator control plane: the RateLimitPolicy controller
// and admission webhooks, with health probes, secure metrics and leader election.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	webhookv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/internal/webhook/v1alpha1"
)

// options are the manager's command-line settings.
type options struct {
	metricsAddr   string
	metricsSecure bool
	probeAddr     string
	leaderElect   bool
	leaderNS      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	enableHTTP2   bool
	webhooks      bool
	scriptResync  time.Duration
	webhookHost   string
	webhookPort   int
	certDir       string
	keyPrefix     string
	backends      bool
	redis         redisconn.Options
	tenancy       tenancyOptions
	memory        memoryOptions
	gateway       gatewayOptions
	usage         usageOptions
	injection     injectionOptions
	zap           zap.Options
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint binds to (HTTPS by default); 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS with Kubernetes authentication and authorization.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader so only one manager replica reconciles at a time.")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "",
		"Namespace of the leader election Lease (default: the pod's namespace; required outside a cluster).")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long a standby waits before taking over from a leader that stopped renewing.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps trying to renew before it gives up leadership.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Serve HTTP/2 on the metrics and webhook servers (off: CVE-2023-44487 rapid reset).")
	fs.BoolVar(&o.webhooks, "webhooks", true,
		"Serve the RateLimitPolicy admission webhooks (needs tls.crt and tls.key in --webhook-cert-dir).")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "Address the admission webhook server binds to (default: every interface).")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port the admission webhook server listens on.")
	fs.StringVar(&o.keyPrefix, "key-prefix", keylayout.DefaultPrefix,
		"Prefix of every Redis key: each key of namespace NS begins with {<prefix>NS/, and policies naming any other key are refused. Characters [A-Za-z0-9._:-], ending with ':'.")
	fs.DurationVar(&o.scriptResync, "script-resync", 10*time.Second,
		"How often the Lua scripts are checked on every Redis primary (SCRIPT EXISTS) and reloaded after a restart or SCRIPT FLUSH.")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "",
		"Directory holding the webhook's tls.crt and tls.key (default: controller-runtime's temp dir).")
	fs.BoolVar(&o.backends, "redis-backends", true,
		"Serve the namespaces a RedisBackend selects on its Redis (their scripts, users and memory checks there); false serves every namespace on the --redis-* Redis.")
	o.redis.BindFlags(fs)
	o.tenancy.bind(fs)
	o.memory.bind(fs)
	o.gateway.bind(fs)
	o.usage.bind(fs)
	o.injection.bind(fs)
	o.zap.BindFlags(fs)
}

func main() {
	var o options
	o.bind(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(o); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager exited")
		os.Exit(1)
	}
}

// validate reports the first bad flag, by name.
func (o *options) validate() error {
	if err := o.redis.Validate(); err != nil {
		return fmt.Errorf("redis flags: %w", err)
	}
	if err := keylayout.ValidatePrefix(o.keyPrefix); err != nil {
		return fmt.Errorf("--key-prefix: %w", err)
	}
	if err := o.tenancy.validate(); err != nil {
		return fmt.Errorf("tenancy flags: %w", err)
	}
	if err := o.memory.validate(); err != nil {
		return fmt.Errorf("redis memory flags: %w", err)
	}
	if err := o.injection.validate(o.webhooks); err != nil {
		return fmt.Errorf("sidecar injection flags: %w", err)
	}
	return nil
}

func run(o options) error {
	log := ctrl.Log.WithName("setup")
	if err := o.validate(); err != nil {
		return err
	}
	rules := policy.Rules{KeyPrefix: o.keyPrefix}
	gateway, err := o.gateway.config()
	if err != nil {
		return err
	}
	rdb, err := redisconn.NewClient(o.redis)
	if err != nil {
		return fmt.Errorf("redis client: %w", err)
	}
	defer func() { _ = rdb.Close() }()
	// Every node, replicas included: per-namespace users and the memory checks visit each.
	nodes, closeNodes, err := redisacl.NodesOf(rdb, o.redis)
	if err != nil {
		return err
	}
	defer func() { _ = closeNodes() }() // exiting: nothing to do about a close error
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), managerOptions(o))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	unknownUsers := tenancy.NewUnknown() // users found unasked, on any Redis
	redises, err := controller.SetupRedises(mgr, rdb, o.redis.Topology(), controller.Config{Resync: o.scriptResync, Rules: rules,
		Gateway: gateway, Functions: o.tenancy.enabled, Memory: o.memory.monitor(nodes, o.tenancy.usersPrefix()),
		Backends: o.backendsConfig(unknownUsers)})
	if err != nil {
		return fmt.Errorf("set up controllers: %w", err)
	}
	if err := o.tenancy.setup(mgr, nodes, o.redis, o.scriptResync, o.keyPrefix, redises, unknownUsers); err != nil {
		return err
	}
	closeUsage, err := o.usage.setup(mgr, redises)
	if err != nil {
		return err
	}
	defer closeUsage()
	if err := o.setupWebhooks(mgr, rules); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	ready := healthz.Ping
	if o.webhooks {
		// Ready once the webhook server serves: the API server calls it for every policy write.
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	log.Info("starting manager", "redisMode", o.redis.Mode, "redisAddrs", o.redis.Addrs,
		"leaderElection", o.leaderElect, "metricsAddr", o.metricsAddr, "webhooks", o.webhooks,
		"tenantUsers", o.tenancy.enabled, "memoryCheckInterval", o.memory.interval,
		"sidecarInjection", o.injection.enabled, "version", version())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// setupWebhooks registers the RateLimitPolicy webhooks and, when enabled, sidecar
// injection; nothing with --webhooks=false.
func (o *options) setupWebhooks(mgr ctrl.Manager, rules policy.Rules) error {
	if !o.webhooks {
		return nil
	}
	if err := webhookv1alpha1.SetupRateLimitPolicyWebhookWithManager(mgr, rules); err != nil {
		return fmt.Errorf("set up webhooks: %w", err)
	}
	return o.injection.setup(mgr)
}

// backendsConfig is the RedisBackends' settings; nil with --redis-backends=false. Their
// users' repair loops report users found unasked on unknown, as the default Redis's does.
func (o *options) backendsConfig(unknown chan event.GenericEvent) *redisbackend.Config {
	if !o.backends {
		return nil
	}
	cfg := &redisbackend.Config{Monitor: func(nodes redisacl.Nodes) *redismemory.Monitor {
		return o.memory.monitor(nodes, o.tenancy.usersPrefix())
	}}
	if o.tenancy.enabled {
		cfg.Users = &redisbackend.Users{Prefix: o.tenancy.userPrefix, Resync: o.scriptResync, Unknown: unknown}
	}
	return cfg
}

func managerOptions(o options) ctrl.Options {
	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metrics := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.metricsSecure,
		TLSOpts:       tlsOpts,
	}
	if o.metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	opts := ctrl.Options{
		Scheme: scheme.New(),
		// Only snapshot ConfigMaps are cached, not every ConfigMap of the cluster.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", snapshot.ConfigMapName)},
		}},
		Metrics:                 metrics,
		WebhookServer:           webhook.NewServer(webhook.Options{Host: o.webhookHost, Port: o.webhookPort, CertDir: o.certDir, TLSOpts: tlsOpts}),
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "ratelimit-operator.policy.ratelimit.dev",
		LeaderElectionNamespace: o.leaderNS,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		// A manager stopping on SIGTERM hands the Lease over at once instead of making the
		// standby wait out the lease: safe because the manager exits right after.
		LeaderElectionReleaseOnCancel: true,
	}
	o.tenancy.addCache(opts.Cache.ByObject) // and, with per-namespace users, only their Secrets
	return opts
}
