package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis/go-redis/v9"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
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

// Setup registers the script loader and the snapshot, policy and override controllers.
func Setup(mgr ctrl.Manager, rdb redis.UniversalClient, topo redisconn.Topology, cfg Config) error {
	recorder := mgr.GetEventRecorder("ratelimit-operator")
	loader := &ScriptLoader{Client: rdb, Functions: cfg.Functions, Resync: cfg.Resync, Log: mgr.GetLogger().WithName("scripts"),
		OnReload: reloadEvents(mgr.GetClient(), recorder)}
	if err := mgr.Add(loader); err != nil {
		return fmt.Errorf("add script loader: %w", err)
	}
	gateways, dataPlane := gatewaySetup(mgr, cfg.Gateway)
	compiler := &Compiler{Rules: cfg.Rules}
	pubs := &Publications{Reader: mgr.GetClient()}
	overrides := served(mgr.GetRESTMapper(), v1alpha1.GroupVersion.Group, "RateLimitOverride", v1alpha1.GroupVersion.Version)
	snaps := &SnapshotReconciler{Client: mgr.GetClient(), Rules: cfg.Rules, Gateways: gateways, Compiler: compiler, Publications: pubs, Overrides: overrides, Redis: snapshot.Redis{
		Mode: string(topo.Mode), Addrs: topo.Addrs, MasterName: topo.MasterName, DB: topo.DB, TLS: topo.TLS,
		Functions: cfg.Functions}}
	if err := snaps.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("snapshot controller: %w", err)
	}
	policies := &PolicyReconciler{Client: mgr.GetClient(), Scripts: loader, Snapshots: pubs,
		Recorder: recorder, Rules: cfg.Rules, Compiler: compiler, Gateways: gateways, DataPlane: dataPlane,
		ready: conditionTracker{gauge: policiesByReady}}
	if cfg.Memory != nil {
		changed, err := setupMemory(mgr, cfg.Memory, cfg.Rules.KeyPrefix)
		if err != nil {
			return err
		}
		policies.Memory, policies.memoryChanged = cfg.Memory, changed
	}
	if err := policies.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("policy controller: %w", err)
	}
	if !overrides {
		mgr.GetLogger().Info("the RateLimitOverride CRD is not installed: overrides are off until it is and the manager restarts",
			"apply", "kubectl apply --server-side -f charts/ratelimit-operator/crds/")
		return nil
	}
	if err := (&OverrideReconciler{Client: mgr.GetClient(), Publications: pubs}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("override controller: %w", err)
	}
	return nil
}

// reloadEvents reports a script repair (Redis restarted or flushed its scripts) as one event
// per namespace, on its snapshot ConfigMap, rather than one per policy.
func reloadEvents(c client.Client, rec events.EventRecorder) func(context.Context, int) {
	return func(ctx context.Context, n int) {
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list); err != nil {
			return
		}
		for i := range list.Items {
			if list.Items[i].Name == snapshot.ConfigMapName {
				rec.Eventf(&list.Items[i], nil, corev1.EventTypeNormal, "ScriptsReloaded", "Reload",
					"%d limiter script(s) had gone missing from Redis (restart or SCRIPT FLUSH) and were loaded again", n)
			}
		}
	}
}
