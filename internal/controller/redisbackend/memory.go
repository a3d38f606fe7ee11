package redisbackend

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// memoryMetrics are the Redis memory monitors' metrics: every node's memory settings and
// findings, and each namespace's keys (redismemory), registered on controller-runtime's
// registry (served on /metrics).
var memoryMetrics = func() *monitorCollector {
	c := &monitorCollector{}
	metrics.Registry.MustRegister(c)
	return c
}()

// SetupMemory runs m, the default Redis's memory monitor, and exports its metrics; the
// channel delivers one event per change of its assessment (one pending is enough), for
// every policy to be re-evaluated.
func SetupMemory(mgr ctrl.Manager, m *redismemory.Monitor, keyPrefix string) (<-chan event.GenericEvent, error) {
	changed := make(chan event.GenericEvent, 1)
	m.OnChange = func() {
		select {
		case changed <- event.GenericEvent{}:
		default:
		}
	}
	if m.KeyPrefix == "" {
		m.KeyPrefix = keyPrefix
	}
	if m.Log.GetSink() == nil {
		m.Log = mgr.GetLogger().WithName("redis-memory")
	}
	if err := mgr.Add(m); err != nil {
		return nil, fmt.Errorf("add redis memory monitor: %w", err)
	}
	memoryMetrics.monitor.Store(m)
	return changed, nil
}

// monitorCollector exports the metrics of the manager's Redis memory monitors: registered
// once, it reads the default Redis's monitor the last Setup started (tests run several
// managers), and each RedisBackend's, its series labelled backend=<name>.
type monitorCollector struct {
	monitor atomic.Pointer[redismemory.Monitor]

	mu       sync.Mutex
	backends map[string]*redismemory.Monitor
}

// Describe implements prometheus.Collector.
func (c *monitorCollector) Describe(ch chan<- *prometheus.Desc) {
	(&redismemory.Monitor{}).Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *monitorCollector) Collect(ch chan<- prometheus.Metric) {
	if m := c.monitor.Load(); m != nil {
		m.Collect(ch)
	}
	c.mu.Lock()
	backends := maps.Clone(c.backends)
	c.mu.Unlock()
	for name, m := range backends {
		prometheus.WrapCollectorWith(prometheus.Labels{"backend": name}, m).Collect(ch)
	}
}

// addBackend exports m's metrics as the RedisBackend name's.
func (c *monitorCollector) addBackend(name string, m *redismemory.Monitor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.backends == nil {
		c.backends = map[string]*redismemory.Monitor{}
	}
	c.backends[name] = m
}

// removeBackend stops exporting m, if it is still the RedisBackend name's.
func (c *monitorCollector) removeBackend(name string, m *redismemory.Monitor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.backends[name] == m {
		delete(c.backends, name)
	}
}
