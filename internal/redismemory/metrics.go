package redismemory

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric descriptions. Node series carry addr (host:port) and role (primary or replica);
// namespace series carry tenant_namespace (not namespace, which scrape targets set to the
// manager's own) and are summed over the last completed SCAN cycle of every primary.
var (
	descMaxMemory = nodeDesc("ratelimit_redis_maxmemory_bytes",
		"Redis maxmemory per node; 0 is unbounded.")
	descUsedMemory = nodeDesc("ratelimit_redis_used_memory_bytes",
		"Redis used_memory per node.")
	descClientLimit = nodeDesc("ratelimit_redis_maxmemory_clients_bytes",
		"Client memory at which Redis evicts clients (maxmemory-clients as Redis applies it) per node; 0 never evicts them.")
	descClientMemory = nodeDesc("ratelimit_redis_client_memory_bytes",
		"Memory of normal clients' buffers per node (INFO mem_clients_normal).")
	descEvicted = nodeDesc("ratelimit_redis_evicted_keys_total",
		"Keys Redis evicted since the node started (INFO evicted_keys); limiter keys among them admit their identities again.")
	descPolicy = nodeDesc("ratelimit_redis_maxmemory_policy_info",
		"1 for each node's maxmemory-policy; only noeviction keeps every counter.", "policy")
	descFinding = nodeDesc("ratelimit_redis_memory_finding",
		"1 when a node's settings have the finding (CountersEvictable, MemoryUnbounded, ClientMemoryUnbounded), else 0.", "finding")
	descChecked = prometheus.NewDesc("ratelimit_redis_memory_checked",
		"1 when the last check read the node's memory settings, 0 when it could not (unreachable, or missing ACL grants).",
		[]string{"addr"}, nil)
	descCheckFailures = prometheus.NewDesc("ratelimit_redis_memory_check_failures_total",
		"Rounds of reading the Redis nodes' memory settings that failed on some node.", nil, nil)
	descNSKeys = namespaceDesc("ratelimit_redis_namespace_keys",
		"Keys in each namespace's scope (namespace _other: keys in none).")
	descNSBytes = namespaceDesc("ratelimit_redis_namespace_memory_bytes",
		"MEMORY USAGE of the keys in each namespace's scope (namespace _other: keys in none).")
	descNSForeign = namespaceDesc("ratelimit_redis_namespace_foreign_keys",
		"Keys without a TTL in each namespace's scope: the limiter writes none, so the namespace's credentials did.")
	descNSForeignBytes = namespaceDesc("ratelimit_redis_namespace_foreign_memory_bytes",
		"MEMORY USAGE of the keys without a TTL in each namespace's scope.")
	descNSClients = namespaceDesc("ratelimit_redis_namespace_clients",
		"Connections of each namespace's Redis user, over every node (tenant users only).")
	descNSClientBytes = namespaceDesc("ratelimit_redis_namespace_client_memory_bytes",
		"Buffer memory (CLIENT LIST tot-mem) of each namespace's connections, over every node (tenant users only).")
	descScanned = prometheus.NewDesc("ratelimit_redis_memory_scanned_keys_total",
		"Keys sized (MEMORY USAGE, PTTL) by the per-namespace sampling.", nil, nil)
	descScanSeconds = prometheus.NewDesc("ratelimit_redis_memory_scan_seconds_total",
		"Time the per-namespace sampling spent waiting on Redis (SCAN steps and their pipelines).", nil, nil)
	descCycles = prometheus.NewDesc("ratelimit_redis_memory_scan_cycles_total",
		"SCAN cycles completed over every primary; each publishes the primary's per-namespace figures.", nil, nil)
)

var descs = []*prometheus.Desc{descMaxMemory, descUsedMemory, descClientLimit, descClientMemory, descEvicted, descPolicy,
	descFinding, descChecked, descCheckFailures, descNSKeys, descNSBytes, descNSForeign, descNSForeignBytes,
	descNSClients, descNSClientBytes, descScanned, descScanSeconds, descCycles}

// nodeDesc describes a series of each node: labelled addr, role and the extra labels.
func nodeDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append([]string{"addr", "role"}, extra...), nil)
}

// namespaceDesc describes a series of each namespace: labelled tenant_namespace.
func namespaceDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"tenant_namespace"}, nil)
}

// Describe implements prometheus.Collector.
func (m *Monitor) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the last report and the running totals.
func (m *Monitor) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	r, st := m.report, m.stats
	m.mu.Unlock()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	counter(descCheckFailures, float64(st.checkFailures))
	counter(descScanned, float64(st.scannedKeys))
	counter(descScanSeconds, st.scanSeconds)
	counter(descCycles, float64(st.cycles))
	if r == nil {
		return
	}
	clients := map[string]Clients{}
	for _, n := range r.Nodes {
		collectNode(ch, n)
		for ns, c := range n.Clients {
			sum := clients[ns]
			sum.Connections += c.Connections
			sum.Memory += c.Memory
			clients[ns] = sum
		}
	}
	for ns, u := range r.Namespaces {
		gauge(ch, descNSKeys, float64(u.Keys), ns)
		gauge(ch, descNSBytes, float64(u.Bytes), ns)
		gauge(ch, descNSForeign, float64(u.ForeignKeys), ns)
		gauge(ch, descNSForeignBytes, float64(u.ForeignBytes), ns)
	}
	for ns, c := range clients {
		gauge(ch, descNSClients, float64(c.Connections), ns)
		gauge(ch, descNSClientBytes, float64(c.Memory), ns)
	}
}

// collectNode sends one node's series.
func collectNode(ch chan<- prometheus.Metric, n Node) {
	if n.Err != nil {
		gauge(ch, descChecked, 0, n.Addr)
		return
	}
	gauge(ch, descChecked, 1, n.Addr)
	role := "replica"
	if n.Primary {
		role = "primary"
	}
	gauge(ch, descMaxMemory, float64(n.MaxMemory), n.Addr, role)
	gauge(ch, descUsedMemory, float64(n.UsedMemory), n.Addr, role)
	gauge(ch, descClientLimit, float64(n.ClientLimit()), n.Addr, role)
	gauge(ch, descClientMemory, float64(n.ClientMemory), n.Addr, role)
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(n.EvictedKeys), n.Addr, role)
	gauge(ch, descPolicy, 1, n.Addr, role, n.Policy)
	found := n.Findings()
	for _, f := range NodeFindings {
		v := 0.0
		if slices.Contains(found, f) {
			v = 1
		}
		gauge(ch, descFinding, v, n.Addr, role, string(f))
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}
