package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/gatewayapi"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/publishing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/ratelimitoverride"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/ratelimitpolicy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts/loader"
)

// Config is what the controllers need of the manager's flags beyond Redis.
type Config struct {
	// Resync is how often the scripts on every Redis primary are checked and repaired.
	Resync time.Duration
	// Rules are the installation's validation settings (the key prefix), the webhook's too.
	Rules policy.Rules
	// Gateway configures policy attachment to Gateway API objects.
	Gateway gatewayapi.Config
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
	Backends *redisbackend.Config
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
func SetupRedises(mgr ctrl.Manager, rdb redis.UniversalClient, topo redisconn.Topology, cfg Config) (*redisbackend.Redises, error) {
	recorder := mgr.GetEventRecorder("ratelimit-operator")
	redises := redisbackend.New(mgr, redisbackend.Options{Client: rdb, Topology: topo, Memory: cfg.Memory,
		Backends: cfg.Backends, KeyPrefix: cfg.Rules.Prefix(), Scripts: scriptLoaders(mgr, cfg), Recorder: recorder})
	if err := mgr.Add(redises.Default().Scripts); err != nil {
		return nil, fmt.Errorf("add script loader: %w", err)
	}
	w := wiring{mgr: mgr, cfg: cfg, recorder: recorder, redises: redises,
		compiler: &publishing.Compiler{Rules: cfg.Rules}, pubs: &publishing.Publications{Reader: mgr.GetClient()},
		overrides: scheme.Served(mgr.GetRESTMapper(), v1alpha1.GroupVersion.WithKind("RateLimitOverride"))}
	w.gateways, w.dataPlane = gatewayapi.New(mgr, cfg.Gateway)
	if err := redisbackend.Setup(mgr, redises); err != nil {
		return nil, err
	}
	if err := w.snapshots(topo); err != nil {
		return nil, err
	}
	if err := w.policies(); err != nil {
		return nil, err
	}
	if err := w.overrideStatus(); err != nil {
		return nil, err
	}
	return redises, nil
}

// wiring is what the controllers share: the Redises, the Gateway API reader, the
// compilations and what is published.
type wiring struct {
	mgr       ctrl.Manager
	cfg       Config
	recorder  events.EventRecorder
	redises   *redisbackend.Redises
	gateways  *gatewayapi.Reader
	dataPlane *gatewayapi.DataPlane
	compiler  *publishing.Compiler
	pubs      *publishing.Publications
	overrides bool // the API server serves RateLimitOverride
}

// snapshots registers the snapshot controller, publishing topo as the default Redis's.
func (w *wiring) snapshots(topo redisconn.Topology) error {
	snaps := &publishing.Reconciler{Client: w.mgr.GetClient(), Rules: w.cfg.Rules, Gateways: w.gateways, Compiler: w.compiler,
		Publications: w.pubs, Overrides: w.overrides, Redises: w.redises, Recorder: w.recorder,
		Redis: publishing.RedisOf(topo, w.cfg.Functions)}
	if err := snaps.SetupWithManager(w.mgr); err != nil {
		return fmt.Errorf("snapshot controller: %w", err)
	}
	return nil
}

// policies registers the policy controller, with the Redis memory monitor when there is one.
func (w *wiring) policies() error {
	policies := &ratelimitpolicy.Reconciler{Client: w.mgr.GetClient(), Scripts: w.redises.Default().Scripts, Redises: w.redises,
		Snapshots: w.pubs, Recorder: w.recorder, Rules: w.cfg.Rules, Compiler: w.compiler, Gateways: w.gateways, DataPlane: w.dataPlane}
	if w.cfg.Memory != nil {
		changed, err := redisbackend.SetupMemory(w.mgr, w.cfg.Memory, w.cfg.Rules.KeyPrefix)
		if err != nil {
			return err
		}
		policies.Memory, policies.MemoryChanged = w.cfg.Memory, changed
	}
	if err := policies.SetupWithManager(w.mgr); err != nil {
		return fmt.Errorf("policy controller: %w", err)
	}
	return nil
}

// overrideStatus registers the override controller when the API server serves
// RateLimitOverride.
func (w *wiring) overrideStatus() error {
	if !w.overrides {
		w.mgr.GetLogger().Info("the RateLimitOverride CRD is not installed: overrides are off until it is and the manager restarts",
			"apply", "kubectl apply --server-side -f charts/ratelimit-operator/crds/")
		return nil
	}
	if err := (&ratelimitoverride.Reconciler{Client: w.mgr.GetClient(), Publications: w.pubs}).SetupWithManager(w.mgr); err != nil {
		return fmt.Errorf("override controller: %w", err)
	}
	return nil
}

// scriptLoaders makes each Redis's ScriptLoader: it logs as "scripts" (with the backend's
// name for a RedisBackend's Redis).
func scriptLoaders(mgr ctrl.Manager, cfg Config) redisbackend.NewScripts {
	return func(name string, c redis.UniversalClient, onReload func(context.Context, int)) redisbackend.Scripts {
		log := mgr.GetLogger().WithName("scripts")
		if name != backend.Default {
			log = log.WithValues("backend", name)
		}
		return &loader.ScriptLoader{Client: c, Functions: cfg.Functions, Resync: cfg.Resync, Log: log, OnReload: onReload}
	}
}
