package redismemory_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// TestMetrics: the collector (checked by a pedantic registry) exports the node's settings
// and findings, and each namespace's keys, as the report has them.
func TestMetrics(t *testing.T) {
	t.Parallel()
	srv, m := standalone(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru", "--maxmemory-clients", "1mb")
	ctx := testCtx(t)
	if err := srv.Client().Set(ctx, "{rl:bank/blob}", strings.Repeat("x", 4096), 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := fullCycle(ctx, t, m)
	got := gather(t, m)
	node := map[string]string{"addr": srv.Addr(), "role": "primary"}
	for _, want := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"ratelimit_redis_maxmemory_bytes", node, 64 << 20},
		{"ratelimit_redis_maxmemory_clients_bytes", node, 1 << 20},
		{"ratelimit_redis_maxmemory_policy_info", with(node, "policy", "allkeys-lru"), 1},
		{"ratelimit_redis_memory_finding", with(node, "finding", string(redismemory.CountersEvictable)), 1},
		{"ratelimit_redis_memory_finding", with(node, "finding", string(redismemory.MemoryUnbounded)), 0},
		{"ratelimit_redis_memory_finding", with(node, "finding", string(redismemory.ClientMemoryUnbounded)), 0},
		{"ratelimit_redis_memory_checked", map[string]string{"addr": srv.Addr()}, 1},
		{"ratelimit_redis_namespace_keys", map[string]string{"tenant_namespace": "bank"}, 1},
		{"ratelimit_redis_namespace_foreign_keys", map[string]string{"tenant_namespace": "bank"}, 1},
		{"ratelimit_redis_namespace_foreign_memory_bytes", map[string]string{"tenant_namespace": "bank"},
			float64(r.Namespaces["bank"].ForeignBytes)},
	} {
		if v, ok := value(got, want.name, want.labels); !ok || v != want.value {
			t.Errorf("%s%v = %v (exported: %v); want %v", want.name, want.labels, v, ok, want.value)
		}
	}
	if v, _ := value(got, "ratelimit_redis_used_memory_bytes", node); v <= 0 {
		t.Errorf("used memory %v", v)
	}
	if v, _ := value(got, "ratelimit_redis_memory_scan_cycles_total", nil); v < 2 {
		t.Errorf("scan cycles %v; want the two fullCycle waited for", v)
	}
}

// gather collects m's metrics through a pedantic registry (which checks them against
// Describe), by name.
func gather(t testing.TB, m *redismemory.Monitor) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// value is the value of the series of name with exactly labels.
func value(got map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range got[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		if len(have) != len(labels) || !mapsEqual(have, labels) {
			continue
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

func mapsEqual(a, b map[string]string) bool {
	keys := func(m map[string]string) []string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(keys(a), keys(b))
}

// with is labels and one more.
func with(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for lk, lv := range labels {
		out[lk] = lv
	}
	return out
}

// scanned is the keys m has sized so far.
func scanned(t testing.TB, m *redismemory.Monitor) float64 {
	t.Helper()
	v, _ := value(gather(t, m), "ratelimit_redis_memory_scanned_keys_total", nil)
	return v
}
