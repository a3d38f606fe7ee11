package controller

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// memoryStatus maps an assessment's state to the condition's status.
var memoryStatus = map[redismemory.State]metav1.ConditionStatus{
	redismemory.Protected: metav1.ConditionTrue,
	redismemory.Exposed:   metav1.ConditionFalse,
	redismemory.Unknown:   metav1.ConditionUnknown,
}

// setCountersProtected sets CountersProtected from the monitor's last report; without a
// monitor the policy has no such condition.
func (r *PolicyReconciler) setCountersProtected(p *v1alpha1.RateLimitPolicy) {
	if r.Memory == nil {
		return
	}
	a := r.Memory.Assess(p.Namespace)
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionCountersProtected,
		Status: memoryStatus[a.State], Reason: a.Reason, Message: a.Message, ObservedGeneration: p.Generation})
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

// monitorCollector exports the metrics of the manager's Redis memory monitor: registered
// once, it reads the monitor the last Setup started (tests run several managers).
type monitorCollector struct {
	monitor atomic.Pointer[redismemory.Monitor]
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
}
