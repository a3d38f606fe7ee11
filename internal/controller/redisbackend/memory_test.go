package redisbackend

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// TestBackendMemoryMetrics: a RedisBackend's memory monitor is exported beside the default
// Redis's, its series labelled backend=<name>, until the backend goes.
func TestBackendMemoryMetrics(t *testing.T) {
	c := &monitorCollector{}
	c.monitor.Store(&redismemory.Monitor{})
	iso := &redismemory.Monitor{}
	c.addBackend("isolated", iso)
	reg := prometheus.NewRegistry() // as controller-runtime's metrics.Registry: not pedantic
	reg.MustRegister(c)
	series := func() []string {
		families, err := prometheus.Gatherers{reg}.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range families {
			if f.GetName() != "ratelimit_redis_memory_check_failures_total" {
				continue
			}
			for _, m := range f.Metric {
				labels := ""
				for _, l := range m.Label {
					labels += l.GetName() + "=" + l.GetValue()
				}
				out = append(out, labels)
			}
		}
		return out
	}
	if got := series(); !slices.Equal(got, []string{"", "backend=isolated"}) {
		t.Errorf("check failure series %q; want the default's and the backend's", got)
	}
	c.removeBackend("isolated", &redismemory.Monitor{}) // another monitor: not this backend's
	c.removeBackend("isolated", iso)
	if got := series(); !slices.Equal(got, []string{""}) {
		t.Errorf("after the backend went: %q", got)
	}
}
