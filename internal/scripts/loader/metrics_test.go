package loader

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/metrictest"
)

// metricValue reads a counter or gauge (metrictest.Value), for the script loader's tests.
func metricValue(t *testing.T, m prometheus.Metric) float64 { return metrictest.Value(t, m) }
