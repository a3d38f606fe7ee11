package loader

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The script loader's metrics, registered on controller-runtime's registry (served on
// /metrics).
var (
	scriptLoads = promauto.With(metrics.Registry).NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_script_loads_total", Help: "Lua scripts loaded into Redis (SCRIPT LOAD of a missing script on a primary)."})
	scriptLoadFailures = promauto.With(metrics.Registry).NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_script_load_failures_total", Help: "Rounds of script checking or loading that failed to reach Redis."})
	foreignLibraries = promauto.With(metrics.Registry).NewGauge(prometheus.GaugeOpts{
		Name: "ratelimit_redis_foreign_function_libraries",
		Help: "Redis function libraries on the primaries that are not the limiter's (with per-namespace users, who may FCALL any function): should be 0."})
)
