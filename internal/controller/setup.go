package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/redis/go-redis/v9"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Config is what the controllers need of the manager's flags beyond Redis.
type Config struct {
	// Resync is how often the scripts on every Redis primary are checked and repaired.
	Resync time.Duration
	// Rules are the installation's validation settings (the key prefix), the webhook's too.
	Rules policy.Rules
	// Gateway configures policy attachment to Gateway API objects.
	Gateway GatewayConfig
	// Functions loads the scripts as Redis function libraries too, and publishes that
	// sidecars call them with FCALL (snapshot.Redis.Functions): what per-namespace Redis
	// users, who may run no EVAL or EVALSHA, need.
	Functions bool
	// Memory, when set, is the Redis memory monitor to run (leader only): Setup adds it to
	// the manager, sets its OnChange (and its KeyPrefix from Rules and its Log when unset),
	// exports its metrics, and reports its assessment in every policy's CountersProtected
	// condition. Nil: no policy has that condition.
	Memory *redismemory.Monitor
	// Backends turns RedisBackends on (when the API server serves them): the namespaces a
	// backend selects are served by its Redis. Nil: every namespace by the default Redis.
	Backends *BackendsConfig
}

// GatewayConfig is how attached policies reach the gateways' data planes.
type GatewayConfig struct {
	// Implementations says which GatewayClasses are Envoy Gateway and which Istio.
	Implementations attachment.Implementations
	// Service and Port are the shared ext_authz service of each namespace (config/service).
	Service string
	// Port is the service's ext_authz gRPC port.
	Port int32
	// IstioProvider is the mesh config ext_authz provider; "{namespace}" is the policy's.
	IstioProvider string
}

// gatewaySetup returns the Gateway API reader and the data plane writer, nil when the API
// server does not serve Gateway API (the reader then finds no target).
func gatewaySetup(mgr ctrl.Manager, cfg GatewayConfig) (*GatewayAPI, *DataPlane) {
	gw := NewGatewayAPI(mgr.GetClient(), mgr.GetRESTMapper())
	log := mgr.GetLogger().WithName("gateway-api")
	if !gw.Enabled {
		log.Info("Gateway API is not served: policies with targetRefs report their targets not found")
		return gw, nil
	}
	m := mgr.GetRESTMapper()
	dp := &DataPlane{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Implementations: cfg.Implementations,
		Service: cfg.Service, Port: cfg.Port, IstioProvider: cfg.IstioProvider,
		SecurityPolicies:      served(m, SecurityPolicyGVK.Group, SecurityPolicyGVK.Kind, SecurityPolicyGVK.Version),
		AuthorizationPolicies: served(m, AuthorizationPolicyGVK.Group, AuthorizationPolicyGVK.Kind, AuthorizationPolicyGVK.Version)}
	log.Info("Gateway API policy attachment", "grpcRoutes", gw.GRPCRoutes,
		"securityPolicies", dp.SecurityPolicies, "authorizationPolicies", dp.AuthorizationPolicies)
	return gw, dp
}

// Setup registers the script loader and the snapshot, policy and override controllers,
// and with cfg.Backends the RedisBackend controller.
func Setup(mgr ctrl.Manager, rdb redis.UniversalClient, topo redisconn.Topology, cfg Config) error {
	_, err := SetupRedises(mgr, rdb, topo, cfg)
	return err
}

// SetupRedises is Setup, returning the Redises that serve the namespaces (rdb as the
// default one): per-namespace users (tenancy.Options.Redises) and the usage API
// (usageapi.Redises) use it too.
func SetupRedises(mgr ctrl.Manager, rdb redis.UniversalClient, topo redisconn.Topology, cfg Config) (*Redises, error) {
	recorder := mgr.GetEventRecorder("ratelimit-operator")
	redises := newRedises(mgr, rdb, topo, cfg, recorder)
	if err := mgr.Add(redises.def.Scripts); err != nil {
		return nil, fmt.Errorf("add script loader: %w", err)
	}
	gateways, dataPlane := gatewaySetup(mgr, cfg.Gateway)
	compiler := &Compiler{Rules: cfg.Rules}
	pubs := &Publications{Reader: mgr.GetClient()}
	overrides := served(mgr.GetRESTMapper(), v1alpha1.GroupVersion.Group, "RateLimitOverride", v1alpha1.GroupVersion.Version)
	if err := setupBackends(mgr, redises, cfg); err != nil {
		return nil, err
	}
	snaps := &SnapshotReconciler{Client: mgr.GetClient(), Rules: cfg.Rules, Gateways: gateways, Compiler: compiler,
		Publications: pubs, Overrides: overrides, Redises: redises, Recorder: recorder,
		Redis: snapshotRedis(topo, cfg.Functions)}
	if err := snaps.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("snapshot controller: %w", err)
	}
	policies := &PolicyReconciler{Client: mgr.GetClient(), Scripts: redises.def.Scripts, Redises: redises, Snapshots: pubs,
		Recorder: recorder, Rules: cfg.Rules, Compiler: compiler, Gateways: gateways, DataPlane: dataPlane,
		ready: conditionTracker{gauge: policiesByReady}}
	if cfg.Memory != nil {
		changed, err := setupMemory(mgr, cfg.Memory, cfg.Rules.KeyPrefix)
		if err != nil {
			return nil, err
		}
		policies.Memory, policies.memoryChanged = cfg.Memory, changed
	}
	if err := policies.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("policy controller: %w", err)
	}
	if !overrides {
		mgr.GetLogger().Info("the RateLimitOverride CRD is not installed: overrides are off until it is and the manager restarts",
			"apply", "kubectl apply --server-side -f charts/ratelimit-operator/crds/")
		return redises, nil
	}
	if err := (&OverrideReconciler{Client: mgr.GetClient(), Publications: pubs}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("override controller: %w", err)
	}
	return redises, nil
}

// newRedises is the Redises of a manager whose default Redis rdb reaches with topology
// topo: its script loader built, not yet added to mgr; RedisBackends off until
// setupBackends.
func newRedises(mgr ctrl.Manager, rdb redis.UniversalClient, topo redisconn.Topology, cfg Config, rec events.EventRecorder) *Redises {
	r := &Redises{cfg: ptrValue(cfg.Backends), keyPrefix: cfg.Rules.Prefix(), elected: mgr.Elected(),
		log: mgr.GetLogger().WithName("redis-backends"), started: make(chan struct{}),
		policies: make(chan event.GenericEvent, 1), statuses: make(chan event.GenericEvent, 1024),
		backends: map[string]*Redis{}, problems: map[string]error{}}
	r.loader = func(name string, c redis.UniversalClient) *ScriptLoader {
		log := mgr.GetLogger().WithName("scripts")
		if name != backend.Default {
			log = log.WithValues("backend", name)
		}
		return &ScriptLoader{Client: c, Functions: cfg.Functions, Resync: cfg.Resync, Log: log,
			OnReload: reloadEvents(mgr.GetClient(), rec, r, name)}
	}
	r.def = &Redis{Name: backend.Default, Topology: topo, Client: rdb, Scripts: r.loader(backend.Default, rdb), Memory: cfg.Memory}
	return r
}

// setupBackends turns RedisBackends on when cfg asks and the API server serves them.
func setupBackends(mgr ctrl.Manager, r *Redises, cfg Config) error {
	if cfg.Backends == nil {
		return nil
	}
	if !served(mgr.GetRESTMapper(), v1alpha1.GroupVersion.Group, "RedisBackend", v1alpha1.GroupVersion.Version) {
		mgr.GetLogger().Info("the RedisBackend CRD is not installed: every namespace uses the default Redis until it is and the manager restarts",
			"apply", "kubectl apply --server-side -f charts/ratelimit-operator/crds/")
		return nil
	}
	r.reader = mgr.GetClient()
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("add redis backends: %w", err)
	}
	rec := &RedisBackendReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Redises: r,
		Elected: mgr.Elected(), Users: cfg.Backends.Users != nil, Refresh: cfg.Backends.Refresh}
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("redisbackend controller: %w", err)
	}
	return nil
}

// ptrValue is *p, or the zero value.
func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// reloadEvents reports a script repair on the Redis named name (Redis restarted or flushed
// its scripts) as one event per namespace it serves, on its snapshot ConfigMap, rather
// than one per policy.
func reloadEvents(c client.Client, rec events.EventRecorder, redises *Redises, name string) func(context.Context, int) {
	return func(ctx context.Context, n int) {
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list); err != nil {
			return
		}
		for i := range list.Items {
			cm := &list.Items[i]
			if cm.Name != snapshot.ConfigMapName {
				continue
			}
			if rt, err := redises.Route(ctx, cm.Namespace); err != nil || rt.Backend != name {
				continue
			}
			rec.Eventf(cm, nil, corev1.EventTypeNormal, "ScriptsReloaded", "Reload",
				"%d limiter script(s) had gone missing from %s (restart or SCRIPT FLUSH) and were loaded again", n, backend.Describe(name))
		}
	}
}
