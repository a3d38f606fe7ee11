package podinject

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of an injection request, the values of the result label.
const (
	// ResultInjected counts Pods that got the sidecar.
	ResultInjected = "injected"
	// ResultSkipped counts Pods left as they were (opted out, already injected, not opted in).
	ResultSkipped = "skipped"
	// ResultDenied counts Pods refused (a bad annotation, or the namespace could not be read).
	ResultDenied = "denied"
)

// injections counts admission requests by result, registered on controller-runtime's
// registry (the manager's /metrics).
var injections = func() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_sidecar_injections_total",
		Help: "Pod admission requests the sidecar injection webhook answered, by result: injected, skipped or denied.",
	}, []string{"result"})
	for _, r := range []string{ResultInjected, ResultSkipped, ResultDenied} {
		c.WithLabelValues(r) // every result is exported from the start, at 0
	}
	metrics.Registry.MustRegister(c)
	return c
}()
