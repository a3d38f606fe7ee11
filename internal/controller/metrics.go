package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The manager's metrics, served with controller-runtime's on /metrics.
var (
	policiesByReady = gaugeVec("ratelimit_policies", "RateLimitPolicies by the status of their Ready condition.", "ready")
	snapshotBytes   = gaugeVec("ratelimit_snapshot_bytes", "Size of the published sidecar snapshot, per namespace.", "namespace")
	snapshotWrites  = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_snapshot_writes_total",
		Help: "Snapshot ConfigMap writes, by operation (create, update, delete).",
	}, []string{"op"})
	scriptLoads = counter("ratelimit_script_loads_total",
		"Lua scripts loaded into Redis (SCRIPT LOAD of a missing script on a primary).")
	scriptLoadFailures = counter("ratelimit_script_load_failures_total",
		"Rounds of script checking or loading that failed to reach Redis.")

	// Per-namespace Redis users (tenancy).
	tenantUsers = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ratelimit_redis_tenant_users",
		Help: "Per-namespace Redis ACL users the manager keeps on every node.",
	})
	tenantRotations = counter("ratelimit_redis_tenant_password_rotations_total",
		"Per-namespace Redis passwords replaced (on request or by the rotation period).")
	tenantRepairs = counter("ratelimit_redis_tenant_user_repairs_total",
		"Per-namespace Redis users set again on a node that had lost or altered them (one per user and node).")
	tenantFailures = counter("ratelimit_redis_tenant_user_failures_total",
		"Changes or checks of per-namespace Redis users that did not reach every node (retried).")
)

func init() {
	metrics.Registry.MustRegister(policiesByReady, snapshotBytes, snapshotWrites, scriptLoads, scriptLoadFailures,
		tenantUsers, tenantRotations, tenantRepairs, tenantFailures)
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func gaugeVec(name, help, label string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{label})
}
