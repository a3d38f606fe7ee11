// Package controller runs the controller (script loader, snapshot and policy
// reconcilers) in-process against a real kube-apiserver + etcd (envtest) and real
// redis-server processes: a standalone server shared by most tests, and a 3-primary Cluster
// for the test that checks every primary. No webhook runs here, so policies are stored as the
// API server alone (schema and CEL) accepts them, and the controller must cope.
package controller

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/redisbackend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/operator"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// resync is the script loader's period in every manager of this suite, and the memory
// monitor's.
const resync = 500 * time.Millisecond

// protectedRedis are redis-server arguments that keep counters and bound memory.
var protectedRedis = redistest.LimiterMemory("256mb", "10%")

var (
	env      *kube.Env
	startErr error // no control plane: a missing part (skip, or fail under CI)
	redisErr error // the shared redis-server did not start (RequireRedis tells missing from broken)
	mgrErr   error // the control plane and Redis started but the manager did not: a failure

	procs   = redistest.NewProcs() // owns the shared redis-server for the whole binary
	mainT   = procs.TB()           // work of the binary's lifetime: cleanups run at procs.Close
	standby *redistest.Server      // the shared standalone redis-server

	sharedMu sync.Mutex
	shared   *manager // the manager bound to standby, restarted by some tests
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env, startErr = kube.Start()
	if startErr != nil {
		fmt.Fprintf(os.Stderr, "controller suite: %v\n", startErr)
	}
	if startErr == nil {
		// Configured as docs/operations.md recommends, so its policies' counters are
		// protected (CountersProtected True, no Warning event).
		standby, redisErr = procs.Server(redistest.WithArgs(protectedRedis...))
	}
	if startErr == nil && redisErr == nil {
		if shared, mgrErr = startManager(env, standby.Client(), standaloneTopology(standby)); mgrErr != nil {
			fmt.Fprintf(os.Stderr, "controller suite: %v\n", mgrErr)
		}
	}
	code := m.Run()
	sharedMu.Lock()
	shared.stop()
	sharedMu.Unlock()
	// Stops redis-server by its PID and removes its directory; an error fails the run.
	if err := procs.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "controller suite: %v\n", err)
		code = max(code, 1)
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "controller suite: %v\n", err)
	}
	os.Exit(code)
}

// suite returns the control plane with Redis and the shared manager running: it skips the
// test (fails it under CI=true) when envtest or redis-server is missing, and fails it when
// they are there but the harness could not start.
func suite(t testing.TB) *kube.Env {
	t.Helper()
	e := kube.Require(t, env, startErr)
	redistest.RequireRedis(t)
	if redisErr != nil {
		t.Fatalf("shared redis-server: %v", redisErr)
	}
	if mgrErr != nil {
		t.Fatalf("manager: %v", mgrErr)
	}
	return e
}

func standaloneTopology(s *redistest.Server) redisconn.Topology {
	return operator.StandaloneTopology(s.Addr())
}

// manager is one running controller-runtime manager with the operator's controllers, and
// the count of its API requests.
type manager struct {
	*operator.Manager
	requests *requestCounter
}

// startManager runs a manager as cmd/manager builds it (ConfigMaps cached by field selector
// metadata.name=ratelimit-snapshot only), without metrics, probes or webhooks, with
// controller.Setup bound to rdb, and returns once its caches are synced. namespaces, when
// given, restricts the cache (a second manager must not fight the shared one elsewhere).
func startManager(e *kube.Env, rdb redis.UniversalClient, topo redisconn.Topology, namespaces ...string) (*manager, error) {
	return startManagerWith(e, rdb, topo, nil, namespaces...)
}

// startManagerWith is startManager with per-namespace Redis users when tenants is set
// (tenancy.Setup, and the Secret cache cmd/manager adds then).
func startManagerWith(e *kube.Env, rdb redis.UniversalClient, topo redisconn.Topology,
	tenants *tenancy.Options, namespaces ...string) (*manager, error) {
	return startManagerSetup(e, rdb, topo, managerSetup{tenants: tenants}, namespaces...)
}

// managerSetup is what a manager of this suite runs beside the controllers.
type managerSetup struct {
	// tenants turns per-namespace Redis users on (tenancy.Setup).
	tenants *tenancy.Options
	// backends turns RedisBackends on, as cmd/manager does: each backend's memory checked
	// every resync, its users (with tenants) repaired every resync.
	backends bool
}

// startManagerSetup is startManager with what s asks besides.
func startManagerSetup(e *kube.Env, rdb redis.UniversalClient, topo redisconn.Topology,
	s managerSetup, namespaces ...string) (*manager, error) {
	tenants := s.tenants
	counter := &requestCounter{}
	cfg := rest.CopyConfig(e.Config)
	cfg.Wrap(counter.wrap)
	opts := managerOptions(namespaces...)
	if tenants != nil {
		obj, by := tenancy.SecretCache(tenants.SecretName)
		opts.Cache.ByObject[obj] = by
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	// With tenancy the scripts are functions too, as cmd/manager sets it up.
	unknown := tenancy.NewUnknown()
	redises, err := controller.SetupRedises(mgr, rdb, topo, controller.Config{Resync: resync, Functions: tenants != nil,
		Memory: memoryMonitor(rdb, tenants), Backends: s.backendsConfig(unknown)})
	if err != nil {
		return nil, fmt.Errorf("set up controllers: %w", err)
	}
	if tenants != nil {
		o := *tenants
		o.Unknown = unknown
		if redises.Enabled() {
			o.Redises = redises
		}
		if err := tenancy.Setup(mgr, o); err != nil {
			return nil, fmt.Errorf("set up tenancy: %w", err)
		}
	}
	m := &manager{Manager: operator.Launch(mgr), requests: counter}
	if err := m.WaitSynced(time.Minute); err != nil {
		return nil, err
	}
	return m, nil
}

// backendsConfig is the RedisBackends' settings of s; nil when they are off.
func (s managerSetup) backendsConfig(unknown chan event.GenericEvent) *redisbackend.Config {
	if !s.backends {
		return nil
	}
	cfg := &redisbackend.Config{Monitor: func(nodes redisacl.Nodes) *redismemory.Monitor {
		m := &redismemory.Monitor{Nodes: nodes, CheckInterval: resync, ScanInterval: resync, ScanCount: redismemory.DefaultScanCount}
		if s.tenants != nil {
			m.TenantUserPrefix = tenantPrefix
		}
		return m
	}}
	if s.tenants != nil {
		cfg.Users = &redisbackend.Users{Prefix: tenantPrefix, Resync: resync, Unknown: unknown}
	}
	return cfg
}

// memoryMonitor is the Redis memory monitor of a manager on rdb, checking every resync:
// over the tenants' nodes when given (reporting its users' connections), over a
// standalone rdb's server otherwise; none on Cluster.
func memoryMonitor(rdb redis.UniversalClient, tenants *tenancy.Options) *redismemory.Monitor {
	m := &redismemory.Monitor{CheckInterval: resync, ScanInterval: resync, ScanCount: redismemory.DefaultScanCount}
	switch c := rdb.(type) {
	case *redis.Client:
		m.Nodes = redisacl.ServerNodes(c)
	default:
		return nil
	}
	if tenants != nil {
		m.Nodes, m.TenantUserPrefix = tenants.Nodes, tenantPrefix
	}
	return m
}

// managerOptions are the options of every manager of this suite (operator.ManagerOptions):
// the cache cmd/manager sets up, no metrics, probes or webhooks; the cache restricted to
// namespaces when given.
func managerOptions(namespaces ...string) ctrl.Options {
	return operator.ManagerOptions(namespaces...)
}

// stop cancels the manager and waits for it to return; again, it does nothing. What goes
// wrong is reported on stderr; a manager that does not stop fails the run.
func (m *manager) stop() {
	if m == nil {
		return
	}
	err := m.Stop()
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "controller suite: %v\n", err)
	if errors.Is(err, operator.ErrNotStopped) {
		mainT.Errorf("manager did not stop within 30s")
	}
}

// restartShared stops the shared manager and starts a fresh one on the same Redis: a
// controller restart, with all in-memory state lost.
func restartShared(t testing.TB) {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	shared.stop()
	m, err := startManager(env, standby.Client(), standaloneTopology(standby))
	if err != nil {
		shared = nil
		t.Fatalf("restart manager: %v", err)
	}
	shared = m
}

// replaceShared stops the shared manager for the rest of the test and starts the given one
// in its place; at cleanup the replacement stops and a fresh shared manager starts.
func replaceShared(t testing.TB, start func() (*manager, error)) *manager {
	t.Helper()
	sharedMu.Lock()
	shared.stop()
	shared = nil
	sharedMu.Unlock()
	m, err := start()
	t.Cleanup(func() {
		m.stop()
		restartShared(t)
	})
	if err != nil {
		t.Fatalf("start replacement manager: %v", err)
	}
	return m
}

// currentShared is the running shared manager.
func currentShared() *manager {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return shared
}

// requestCounter counts the manager's API requests by HTTP method.
type requestCounter struct {
	total, writes atomic.Int64
	mu            sync.Mutex
	byMethod      map[string]int64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		c.total.Add(1)
		if req.Method != http.MethodGet {
			c.writes.Add(1)
		}
		c.mu.Lock()
		if c.byMethod == nil {
			c.byMethod = map[string]int64{}
		}
		c.byMethod[req.Method]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// snapshot returns the counts so far: total, non-GET, and by method.
func (c *requestCounter) snapshot() (total, writes int64, byMethod map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byMethod = make(map[string]int64, len(c.byMethod))
	for k, v := range c.byMethod {
		byMethod[k] = v
	}
	return c.total.Load(), c.writes.Load(), byMethod
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
