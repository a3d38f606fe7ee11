package redisbackend

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
)

// Options are what New needs: the default Redis, and RedisBackends' settings.
type Options struct {
	// Client reaches the default Redis (the --redis-* flags) as the manager's user.
	Client redis.UniversalClient
	// Topology is how sidecars reach the default Redis.
	Topology redisconn.Topology
	// Memory is the default Redis's memory monitor; nil when the checks are off.
	Memory *redismemory.Monitor
	// Backends turns RedisBackends on (Setup); nil: every namespace by the default Redis.
	Backends *Config
	// KeyPrefix is the installation's key prefix, which the backends' memory monitors
	// sample.
	KeyPrefix string
	// Scripts makes each Redis's script loader.
	Scripts NewScripts
	// Recorder reports script reloads, on the snapshot ConfigMaps of the namespaces served.
	Recorder events.EventRecorder
}

// New is the Redises of mgr: the default Redis, its script loader built (not yet added to
// mgr), and RedisBackends off until Setup.
func New(mgr ctrl.Manager, o Options) *Redises {
	r := &Redises{cfg: o.Backends, scripts: o.Scripts, configMaps: mgr.GetClient(), recorder: o.Recorder,
		keyPrefix: o.KeyPrefix, elected: mgr.Elected(), log: mgr.GetLogger().WithName("redis-backends"),
		started: make(chan struct{}), policies: make(chan event.GenericEvent, 1), statuses: make(chan event.GenericEvent, 1024),
		backends: map[string]*Redis{}, problems: map[string]error{}}
	r.def = &Redis{Name: backend.Default, Topology: o.Topology, Client: o.Client,
		Scripts: o.Scripts(backend.Default, o.Client, r.reloaded(backend.Default)), Memory: o.Memory}
	return r
}

// Default is the default Redis (the --redis-* flags).
func (r *Redises) Default() *Redis { return r.def }

// Setup turns RedisBackends on when New was asked to (Options.Backends) and the API server
// serves them: r joins mgr, and the RedisBackend controller is registered.
func Setup(mgr ctrl.Manager, r *Redises) error {
	if r.cfg == nil {
		return nil
	}
	if !scheme.Served(mgr.GetRESTMapper(), v1alpha1.GroupVersion.WithKind("RedisBackend")) {
		mgr.GetLogger().Info("the RedisBackend CRD is not installed: every namespace uses the default Redis until it is and the manager restarts",
			"apply", "kubectl apply --server-side -f charts/ratelimit-operator/crds/")
		return nil
	}
	r.reader = mgr.GetClient()
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("add redis backends: %w", err)
	}
	rec := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Redises: r,
		Elected: mgr.Elected(), Users: r.cfg.Users != nil, Refresh: r.cfg.Refresh}
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("redisbackend controller: %w", err)
	}
	return nil
}
