package controller

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// memoryStatus maps an assessment's state to the condition's status.
var memoryStatus = map[redismemory.State]metav1.ConditionStatus{
	redismemory.Protected: metav1.ConditionTrue,
	redismemory.Exposed:   metav1.ConditionFalse,
	redismemory.Unknown:   metav1.ConditionUnknown,
}

// setCountersProtected sets CountersProtected from the last report of the monitor of the
// Redis serving the policy's namespace (rt); with the memory checks off the policy has no
// such condition.
func (r *PolicyReconciler) setCountersProtected(p *v1alpha1.RateLimitPolicy, rt Route) {
	if r.Memory == nil {
		return
	}
	a := assess(p.Namespace, rt)
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionCountersProtected,
		Status: memoryStatus[a.State], Reason: a.Reason, Message: a.Message, ObservedGeneration: p.Generation})
}

// assess is what the monitor of rt's Redis says of namespace ns: Unknown while that Redis
// is not connected, or has no monitor.
func assess(ns string, rt Route) redismemory.Assessment {
	switch {
	case rt.Redis == nil:
		return redismemory.Assessment{State: redismemory.Unknown, Reason: redismemory.ReasonRedisUnavailable,
			Message: rt.notConnected().Error()}
	case rt.Redis.Memory == nil:
		return redismemory.Assessment{State: redismemory.Unknown, Reason: redismemory.ReasonNotChecked,
			Message: "the memory of " + backend.Describe(rt.Backend) + " is not checked"}
	}
	return rt.Redis.Memory.Assess(ns)
}

// setupMemory runs the Redis memory monitor m and has every policy re-evaluated when its
// assessment changes: the channel delivers one event per change (one pending is enough).
func setupMemory(mgr ctrl.Manager, m *redismemory.Monitor, keyPrefix string) (chan event.GenericEvent, error) {
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
