package redismemory

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
)

// Defaults of Monitor.
const (
	// DefaultCheckInterval is how often every node's settings are read.
	DefaultCheckInterval = 30 * time.Second
	// DefaultScanInterval is how often each primary's SCAN takes a step.
	DefaultScanInterval = time.Second
	// DefaultScanCount is the SCAN COUNT of a step: about that many keys are sized per
	// primary and DefaultScanInterval.
	DefaultScanCount = 1000
	// DefaultMaxNamespaces bounds the namespaces a cycle tracks (and the metrics' series).
	DefaultMaxNamespaces = 1000
	// DefaultTimeout bounds one round on every node.
	DefaultTimeout = 5 * time.Second
)

// Monitor checks every node's memory settings each CheckInterval and samples each
// primary's keys each ScanInterval, and keeps the last Report. It is a manager Runnable
// (leader only: one manager asks Redis) and a Prometheus collector.
type Monitor struct {
	// Nodes are every node of the deployment (redisacl.NodesOf). Required.
	Nodes redisacl.Nodes
	// KeyPrefix is the operator's key prefix. Default keylayout.DefaultPrefix.
	KeyPrefix string
	// TenantUserPrefix begins the per-namespace users' names; set, CLIENT LIST reports
	// each namespace's connections. Empty without tenant users.
	TenantUserPrefix string
	// CheckInterval is how often the settings are read. Default DefaultCheckInterval.
	CheckInterval time.Duration
	// ScanInterval is how often each primary's SCAN takes a step. Default
	// DefaultScanInterval.
	ScanInterval time.Duration
	// ScanCount is the SCAN COUNT of a step; 0 or less turns the sampling off.
	ScanCount int64
	// MaxNamespaces bounds the namespaces a cycle tracks; keys of further ones count as
	// OtherNamespace. Default DefaultMaxNamespaces.
	MaxNamespaces int
	// Timeout bounds one round. Default DefaultTimeout.
	Timeout time.Duration
	// Log receives changes of what the monitor finds.
	Log logr.Logger
	// OnChange, when set, is called after a round that changed some namespace's
	// Assessment. It must not block.
	OnChange func()

	roundMu sync.Mutex // one round at a time

	mu        sync.Mutex
	report    *Report
	nodes     map[string]Node             // by address, from the last check
	primaries map[string]*redis.Client    // by address, from the last check
	scans     map[string]*scan            // by primary, cycles in progress
	cycles    map[string]map[string]Usage // by primary, its last completed cycle
	counts    map[string]int64            // by primary, cycles completed
	missing   map[string][]string         // by primary, rules its sampling lacks
	// checkedAt and listErr are the last check's time and its failure to list the nodes.
	checkedAt time.Time
	listErr   error
	digest    string
	stats     stats
}

// stats are the monitor's running totals.
type stats struct {
	scannedKeys   int64
	scanSeconds   float64
	cycles        int64
	checkFailures int64
}

// Start implements manager.Runnable: a round every ScanInterval (every CheckInterval
// without sampling), the settings read every CheckInterval, until ctx ends.
func (m *Monitor) Start(ctx context.Context) error {
	tick := m.checkInterval()
	if m.ScanCount > 0 {
		tick = min(tick, m.scanInterval())
	}
	var nextCheck time.Time
	wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		check := !time.Now().Before(nextCheck)
		if check {
			nextCheck = time.Now().Add(m.checkInterval())
		}
		m.Round(ctx, check)
	}, tick)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader asks.
func (m *Monitor) NeedLeaderElection() bool { return true }

// Round does one round: with check, it reads every node's settings; with sampling on,
// each primary's SCAN takes one step. Start calls it; callers driving the monitor
// themselves (a one-shot check, tests) may too.
func (m *Monitor) Round(ctx context.Context, check bool) {
	m.roundMu.Lock()
	defer m.roundMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	if check {
		m.check(ctx)
	}
	if m.scanPrimaries(ctx) || check {
		m.publish()
	}
}

// check reads every node's settings and records them, and the primaries to sample.
func (m *Monitor) check(ctx context.Context) {
	var mu sync.Mutex
	nodes, primaries := map[string]Node{}, map[string]*redis.Client{}
	err := m.Nodes.ForEach(ctx, func(ctx context.Context, c *redis.Client) error {
		n := checkNode(ctx, c, m.TenantUserPrefix)
		mu.Lock()
		defer mu.Unlock()
		nodes[n.Addr] = n
		if n.Err == nil && n.Primary {
			primaries[n.Addr] = c
		}
		return nil
	})
	m.checked(nodes, primaries, err)
}

// scanPrimaries takes one SCAN step on every primary the last check found, at once, and
// reports whether a step completed a cycle or changed what sampling lacks. The clients are
// the Nodes' own, kept from the check: a step does not list the nodes again.
func (m *Monitor) scanPrimaries(ctx context.Context) bool {
	if m.ScanCount <= 0 {
		return false
	}
	m.mu.Lock()
	primaries := maps.Clone(m.primaries)
	m.mu.Unlock()
	var changed atomic.Bool
	var wg sync.WaitGroup
	for addr, c := range primaries {
		wg.Go(func() {
			if m.scanStep(ctx, c, addr) {
				changed.Store(true)
			}
		})
	}
	wg.Wait()
	return changed.Load()
}

// Report is the last report; nil before the first round. It is never changed: a round
// replaces it.
func (m *Monitor) Report() *Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.report
}

// Assess is what the last report says of namespace ns's counters.
func (m *Monitor) Assess(ns string) Assessment { return m.Report().Assess(ns) }

// scanStep takes one SCAN step on a primary and reports whether it completed a cycle.
func (m *Monitor) scanStep(ctx context.Context, c *redis.Client, addr string) bool {
	m.mu.Lock()
	s := m.scans[addr]
	if s == nil {
		s = &scan{}
		m.scans = setIn(m.scans, addr, s)
	}
	m.mu.Unlock()
	start := time.Now()
	res, err := s.step(ctx, c, m.ScanCount, m.keyPrefix(), m.maxNamespaces())
	took := time.Since(start).Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.scannedKeys += int64(res.keys)
	m.stats.scanSeconds += took
	changed := !slices.Equal(m.missing[addr], res.missing)
	m.missing = setIn(m.missing, addr, res.missing)
	if err != nil {
		m.Log.V(1).Info("memory sampling step failed; retried next round", "node", addr, "error", err.Error())
	}
	if !res.done {
		return changed
	}
	m.cycles = setIn(m.cycles, addr, s.usage)
	m.counts = setIn(m.counts, addr, m.counts[addr]+1)
	m.stats.cycles++
	m.scans[addr] = &scan{}
	return true
}

// checked records a check round: the nodes it reached, the primaries among them, and err,
// the failure to list them. What sampling knows of nodes that are no primaries (any more) is
// dropped.
func (m *Monitor) checked(nodes map[string]Node, primaries map[string]*redis.Client, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	failed := err != nil
	for _, n := range nodes {
		failed = failed || n.Err != nil
	}
	for addr := range m.scans {
		if primaries[addr] == nil {
			m.forgetScan(addr)
		}
	}
	if failed {
		m.stats.checkFailures++
	}
	m.nodes, m.primaries, m.checkedAt, m.listErr = nodes, primaries, time.Now(), err
}

// forgetScan drops what sampling knows of a node that is no primary (any more); m.mu is
// held.
func (m *Monitor) forgetScan(addr string) {
	delete(m.scans, addr)
	delete(m.cycles, addr)
	delete(m.counts, addr)
	delete(m.missing, addr)
}

// publish builds the report from the last check and the completed cycles, and tells
// OnChange when an assessment changed.
func (m *Monitor) publish() {
	m.mu.Lock()
	r := m.buildLocked()
	m.report = r
	digest := r.digest()
	changed := digest != m.digest
	m.digest = digest
	m.mu.Unlock()
	if changed {
		m.Log.Info("Redis memory assessment changed", "assessment", digest)
		if m.OnChange != nil {
			m.OnChange()
		}
	}
}

// buildLocked is the report of the current state; m.mu is held.
func (m *Monitor) buildLocked() *Report {
	r := &Report{Checked: m.checkedAt, Err: m.listErr, Namespaces: map[string]Usage{}, Cycles: map[string]int64{},
		Sampling: m.ScanCount > 0}
	for _, addr := range sortedKeys(m.nodes) {
		n := m.nodes[addr]
		n.Missing = missingRules(n.Missing, m.missing[addr])
		r.Nodes = append(r.Nodes, n)
	}
	for addr, usage := range m.cycles {
		r.Cycles[addr] = m.counts[addr]
		for ns, u := range usage {
			sum := r.Namespaces[ns]
			sum.add(u)
			r.Namespaces[ns] = sum
		}
	}
	return r
}

func (m *Monitor) keyPrefix() string {
	if m.KeyPrefix == "" {
		return keylayout.DefaultPrefix
	}
	return m.KeyPrefix
}

func (m *Monitor) checkInterval() time.Duration {
	return orDefault(m.CheckInterval, DefaultCheckInterval)
}
func (m *Monitor) scanInterval() time.Duration { return orDefault(m.ScanInterval, DefaultScanInterval) }
func (m *Monitor) timeout() time.Duration      { return orDefault(m.Timeout, DefaultTimeout) }

func (m *Monitor) maxNamespaces() int {
	if m.MaxNamespaces <= 0 {
		return DefaultMaxNamespaces
	}
	return m.MaxNamespaces
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// setIn sets m[k] = v, creating m.
func setIn[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// join lists items for a message: at most five, then how many more.
func join(items []string) string {
	if len(items) > 5 {
		return strings.Join(items[:5], ", ") + " and " + itoa(len(items)-5) + " more"
	}
	return strings.Join(items, ", ")
}
