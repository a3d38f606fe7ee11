package sidecartest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Family is the metric family name as reg gathers it, or nil when reg has none.
func Family(t testing.TB, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// MetricValue sums the series of a counter or gauge whose labels include want; for a
// histogram, its sample counts.
func MetricValue(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	var sum float64
	for _, m := range Family(t, reg, name).GetMetric() {
		if hasLabels(m.GetLabel(), want) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func hasLabels(have []*dto.LabelPair, want map[string]string) bool {
	n := 0
	for _, l := range have {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}
