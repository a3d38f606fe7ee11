package ratelimitpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// policiesByReady counts RateLimitPolicies by their Ready condition's status, registered on
// controller-runtime's registry (served on /metrics).
var policiesByReady = promauto.With(metrics.Registry).NewGaugeVec(prometheus.GaugeOpts{
	Name: "ratelimit_policies", Help: "RateLimitPolicies by the status of their Ready condition."}, []string{"ready"})
