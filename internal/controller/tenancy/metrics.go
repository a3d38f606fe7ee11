package tenancy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The per-namespace users' metrics, registered on controller-runtime's registry (served on
// /metrics) with the controllers' own.
var (
	tenantUsers     = gauge("ratelimit_redis_tenant_users", "Per-namespace Redis ACL users the manager keeps on every node.")
	tenantRotations = counter("ratelimit_redis_tenant_password_rotations_total",
		"Per-namespace Redis passwords replaced (on request or by the rotation period).")
	tenantRepairs = counter("ratelimit_redis_tenant_user_repairs_total",
		"Per-namespace Redis users set again on a node that had lost or altered them (one per user and node).")
	tenantFailures = counter("ratelimit_redis_tenant_user_failures_total",
		"Changes or checks of per-namespace Redis users that did not reach every node (retried).")
)

func counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	metrics.Registry.MustRegister(c)
	return c
}

func gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	metrics.Registry.MustRegister(g)
	return g
}
