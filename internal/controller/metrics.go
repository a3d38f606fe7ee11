package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The manager's metrics, registered on controller-runtime's registry (served on /metrics).
var (
	policiesByReady    = gaugeVec("ratelimit_policies", "RateLimitPolicies by the status of their Ready condition.", "ready")
	snapshotBytes      = gaugeVec("ratelimit_snapshot_bytes", "Size of the published sidecar snapshot, per namespace.", "namespace")
	snapshotWrites     = counterVec("ratelimit_snapshot_writes_total", "Snapshot ConfigMap writes, by operation (create, update, delete).", "op")
	scriptLoads        = counter("ratelimit_script_loads_total", "Lua scripts loaded into Redis (SCRIPT LOAD of a missing script on a primary).")
	scriptLoadFailures = counter("ratelimit_script_load_failures_total", "Rounds of script checking or loading that failed to reach Redis.")
	foreignLibraries   = gauge("ratelimit_redis_foreign_function_libraries",
		"Redis function libraries on the primaries that are not the limiter's (with per-namespace users, who may FCALL any function): should be 0.")

	// memoryMetrics are the Redis memory monitor's: every node's memory settings and
	// findings, and each namespace's keys (redismemory).
	memoryMetrics = register(&monitorCollector{})
)

func register[C prometheus.Collector](c C) C {
	metrics.Registry.MustRegister(c)
	return c
}

func counter(name, help string) prometheus.Counter {
	return register(prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

func gauge(name, help string) prometheus.Gauge {
	return register(prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}
