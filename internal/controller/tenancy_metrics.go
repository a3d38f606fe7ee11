package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	tenantUsers = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ratelimit_redis_tenant_users",
		Help: "Per-namespace Redis ACL users the manager keeps on every node.",
	})
	tenantRotations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_redis_tenant_password_rotations_total",
		Help: "Per-namespace Redis passwords replaced (on request or by the rotation period).",
	})
	tenantRepairs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_redis_tenant_user_repairs_total",
		Help: "Per-namespace Redis users set again on a node that had lost or altered them (one per user and node).",
	})
	tenantFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_redis_tenant_user_failures_total",
		Help: "Changes or checks of per-namespace Redis users that did not reach every node (retried).",
	})
)

func init() {
	metrics.Registry.MustRegister(tenantUsers, tenantRotations, tenantRepairs, tenantFailures)
}
