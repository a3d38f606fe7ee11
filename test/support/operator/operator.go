// Package operator runs the operator's controllers (script loader, snapshot and policy
// reconcilers) in-process, wired as cmd/manager wires them, for the suites under
// test/integration that need them against envtest and a real redis-server.
package operator

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// ManagerOptions are the options of an in-process manager: the cache cmd/manager sets up
// (ConfigMaps by field selector metadata.name=ratelimit-snapshot only), no metrics, probes or
// webhooks, controller names reusable (tests start several managers in one process); the
// cache restricted to namespaces when given, so that managers of different tests (or a
// second manager beside a shared one) do not fight over each other's namespaces.
func ManagerOptions(namespaces ...string) ctrl.Options {
	opts := ctrl.Options{
		Scheme: scheme.New(),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", snapshot.ConfigMapName)},
		}},
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		GracefulShutdownTimeout: ptr.To(10 * time.Second),
	}
	if len(namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// StandaloneTopology is the topology of one standalone redis-server at addr.
func StandaloneTopology(addr string) redisconn.Topology {
	return redisconn.Topology{Mode: redisconn.ModeStandalone, Addrs: []string{addr}}
}

// Start runs a manager with ManagerOptions(namespaces...) and controller.Setup bound to rdb
// (the script loader checking every resync), and returns once its caches are synced.
func Start(cfg *rest.Config, rdb redis.UniversalClient, topo redisconn.Topology, resync time.Duration, namespaces ...string) (*Manager, error) {
	return StartWith(cfg, rdb, topo, controller.Config{Resync: resync}, namespaces...)
}

// StartWith is Start with the controllers' whole configuration (Gateway API settings, say).
func StartWith(cfg *rest.Config, rdb redis.UniversalClient, topo redisconn.Topology, conf controller.Config, namespaces ...string) (*Manager, error) {
	mgr, err := ctrl.NewManager(rest.CopyConfig(cfg), ManagerOptions(namespaces...))
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := controller.Setup(mgr, rdb, topo, conf); err != nil {
		return nil, fmt.Errorf("set up controllers: %w", err)
	}
	m := Launch(mgr)
	if err := m.WaitSynced(time.Minute); err != nil {
		return nil, err
	}
	return m, nil
}

// StartT is Start for one test: it fails the test when the manager does not start, and
// stops the manager when the test ends (Stop before that is fine).
func StartT(t testing.TB, cfg *rest.Config, rdb redis.UniversalClient, topo redisconn.Topology, resync time.Duration, namespaces ...string) *Manager {
	t.Helper()
	m, err := Start(cfg, rdb, topo, resync, namespaces...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	})
	return m
}
