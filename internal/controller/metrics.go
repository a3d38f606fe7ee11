package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	policiesByReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ratelimit_policies",
		Help: "RateLimitPolicies by the status of their Ready condition.",
	}, []string{"ready"})
	snapshotBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ratelimit_snapshot_bytes",
		Help: "Size of the published sidecar snapshot, per namespace.",
	}, []string{"namespace"})
	snapshotWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_snapshot_writes_total",
		Help: "Snapshot ConfigMap writes, by operation (create, update, delete).",
	}, []string{"op"})
	scriptLoads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_script_loads_total",
		Help: "Lua scripts loaded into Redis (SCRIPT LOAD of a missing script on a primary).",
	})
	scriptLoadFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_script_load_failures_total",
		Help: "Rounds of script checking or loading that failed to reach Redis.",
	})
)

func init() {
	metrics.Registry.MustRegister(policiesByReady, snapshotBytes, snapshotWrites, scriptLoads, scriptLoadFailures)
}
