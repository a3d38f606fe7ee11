package publishing

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The snapshot publisher's metrics, registered on controller-runtime's registry (served on
// /metrics).
var (
	snapshotBytes = promauto.With(metrics.Registry).NewGaugeVec(prometheus.GaugeOpts{
		Name: "ratelimit_snapshot_bytes", Help: "Size of the published sidecar snapshot, per namespace."}, []string{"namespace"})
	snapshotWrites = promauto.With(metrics.Registry).NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_snapshot_writes_total", Help: "Snapshot ConfigMap writes, by operation (create, update, delete)."}, []string{"op"})
)
