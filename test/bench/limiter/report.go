package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/app"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchredis"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
)

// The targets of the performance issues, judged below the table.
const (
	targetUSRatio   = 0.8                   // Redis µs per call against the baseline's
	targetPipelined = 0.80                  // pipelined limiter against the ceiling
	targetBytes     = 100                   // bytes per identity, TokenBucket and GCRA
	targetGRPC      = 0.20                  // gRPC front against the ceiling
	targetGRPCP99   = 10 * time.Millisecond // and its p99
)

// ceiling is the median of r's redis-benchmark runs.
func (r *row) ceiling() benchredis.Ceiling { return medianCeiling(r.ceilings) }

// medianCeiling is the median of each figure of runs.
func medianCeiling(runs []benchredis.Ceiling) benchredis.Ceiling {
	return benchredis.Ceiling{
		PerSec:   load.MedianOf(runs, func(c benchredis.Ceiling) float64 { return c.PerSec }),
		UsecCall: load.MedianOf(runs, func(c benchredis.Ceiling) float64 { return c.UsecCall }),
		CPUCall:  load.MedianOf(runs, func(c benchredis.Ceiling) time.Duration { return c.CPUCall }),
	}
}

// overAdmitted names the scripts that admitted more than their limit.
func (rep *report) overAdmitted() []string {
	names := rep.overAdmittedRows()
	for _, h := range rep.hot {
		if h.over.excess() > 0 {
			names = append(names, fmt.Sprintf("%s with leases (+%d)", h.alg, h.over.excess()))
		}
	}
	for _, s := range rep.shards {
		if s.admitted > s.limit {
			names = append(names, fmt.Sprintf("global limit, %s (+%d)", s.name, s.admitted-s.limit))
		}
	}
	if rep.fcall != nil {
		names = append(names, rep.fcall.overAdmitted()...)
	}
	return names
}

func (rep *report) overAdmittedRows() []string {
	var names []string
	for _, r := range rep.rows {
		if r.over.runs > 0 && r.over.excess() > 0 {
			names = append(names, fmt.Sprintf("%s (+%d)", r.name, r.over.excess()))
		}
	}
	return names
}

func printReport(w io.Writer, c config, rep *report) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	printHeader(p, c, rep)
	p("### Per algorithm, one redis-server\n\n")
	p("%s\n", mainTable(c, rep.rows))
	printNotes(p, c, rep.rows)
	p("### Targets\n\n%s\n", targetsTable(c, rep.rows))
	printGateways(p, c, rep)
	printController(p, rep.controller)
	printCluster(p, c, rep)
	printHotKeys(p, c, rep)
	printFCallReplicas(p, c, rep)
}

func printHeader(p func(string, ...any), c config, rep *report) {
	m := rep.machine
	model := ""
	if m.cpuModel != "" {
		model = " (" + m.cpuModel + ")"
	}
	p("Run %s, took %s. Machine: %d CPUs%s, %s, redis-server %s, %s. Load average (1, 5, 15 min) %s at the start, %s at the end: "+
		"the generator, the sidecar and Redis share these CPUs with whatever else runs.\n\n",
		m.date.Format("2006-01-02 15:04 MST"), rep.elapsed.Round(time.Second), m.cpus, model, m.goVersion,
		m.redisVersion, orUnknown(m.benchmarkTool), m.loadAtStart, orUnknown(rep.loadEnd))
	p("Settings: %d callers over %d identities (%d/s per identity: nearly every check admitted); "+
		"every throughput and latency cell is the %s, each after a %s warm-up; "+
		"ceiling: redis-benchmark -c 50 -P 16, %d EVALSHA per run; limiter %s; gRPC front: %d client connections of the %s client, %d stream workers, pipelining on, "+
		"the sidecar's GC target (--gc-percent %d) while it serves.\n\n",
		c.callers, c.identities, requestsPerSecond, medianOf(c), warmup(c), c.benchCalls,
		pipelineWorkers(c), c.conns, c.client, c.streamWorkers, app.DefaultGCPercent)
	if c.wideCallers > 0 {
		p("The limiter runs twice: with %d callers, and with %d. Each caller waits for its answer before sending again, so "+
			"%d callers can never exceed %d / round trip (Little's law), while redis-benchmark keeps 50 × 16 = 800 calls in flight: "+
			"the %d-caller run, still under a third of that, shows what the pipelining itself sustains, and is the one judged against the target.\n\n",
			c.callers, c.wideCallers, c.callers, c.callers, c.wideCallers)
	}
}

// medianOf says what a cell holds: "median of 3 runs of 2s".
func medianOf(c config) string {
	if c.reps <= 1 {
		return fmt.Sprintf("figure of 1 run of %s", c.duration)
	}
	return fmt.Sprintf("median of %d runs of %s", c.reps, c.duration)
}

func pipelineWorkers(c config) string {
	if c.workers <= 0 {
		return "pipelining with its default pipelines in flight"
	}
	return fmt.Sprintf("pipelining with %d pipelines in flight", c.workers)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func mainTable(c config, rows []*row) *table {
	t := newTable("script", "Redis µs/call", "vs baseline", "ceiling /s (redis-benchmark -P16)",
		fmt.Sprintf("limiter /s (pipelined, %d callers)", c.callers), "of ceiling", "p50", "p99",
		fmt.Sprintf("limiter /s (%d callers)", c.wideCallers), "of ceiling", "p99",
		fmt.Sprintf("RLS gRPC /s (%d callers)", c.callers), "of ceiling", "p50", "p99",
		fmt.Sprintf("ext_authz gRPC /s (%d callers)", c.callers), "of ceiling", "p50", "p99",
		"B/id (49-char key)", "B/id (31-char key)", "over-admission")
	t.left[0] = true
	base := rows[0].ceiling().UsecCall
	for _, r := range rows {
		ceil := r.ceiling()
		direct, wide, grpc, authz := load.Median(r.direct), load.Median(r.wide), load.Median(r.grpc), load.Median(r.extauthz)
		t.add(r.name, fmt.Sprintf("%.2f", ceil.UsecCall), fmt.Sprintf("%.2f×", ceil.UsecCall/base),
			fmt.Sprintf("%.0f", ceil.PerSec),
			rate(direct), share(direct.PerSec, ceil.PerSec), dur(direct.P50), dur(direct.P99),
			rate(wide), share(wide.PerSec, ceil.PerSec), dur(wide.P99),
			rate(grpc), share(grpc.PerSec, ceil.PerSec), dur(grpc.P50), dur(grpc.P99),
			rate(authz), share(authz.PerSec, ceil.PerSec), dur(authz.P50), dur(authz.P99),
			fmt.Sprintf("%.0f", r.bytesLong), fmt.Sprintf("%.0f", r.bytesShort), overCell(r.over))
	}
	return t
}

func printNotes(p func(string, ...any), c config, rows []*row) {
	var runs []load.Stats
	for _, r := range rows {
		runs = slices.Concat(runs, r.direct, r.grpc, r.extauthz)
	}
	if other := otherLoad(runs); other != "" {
		p("Other processes on the machine used %s of its CPU time during the limiter and gRPC runs "+
			"(/proc/stat less this process and redis-server).\n\n", other)
	}
	if len(rows) > 0 && rows[0].over.runs > 0 {
		o := rows[0].over
		p("Over-admission: admitted − L for one identity with L = %d per %.0f h (nothing refills meanwhile), "+
			"%d goroutines over %d separate Redis clients (each its own limiter, half of them pipelining), released together, "+
			"%d checks per run; the worst of %d runs. Anything above 0 fails the command.\n\n",
			o.limit, overPeriod.Hours(), c.overCallers, c.overClients, o.attempts, o.runs)
	}
	for _, r := range rows {
		var fallbacks, denied int
		for _, s := range slices.Concat(r.direct, r.grpc, r.extauthz) {
			fallbacks, denied = fallbacks+s.Fallbacks, denied+s.Denied
		}
		if fallbacks > 0 || denied > 0 {
			p("Note: %s: %d checks decided without Redis (timeouts) and %d denied during the throughput runs; "+
				"a quiet run has none.\n\n", r.name, fallbacks, denied)
		}
		if r.over.runs > 0 && r.over.excess() < 0 {
			p("Note: %s admitted %d of its limit %d: under-admission.\n\n", r.name, r.over.admitted, r.over.limit)
		}
	}
}

func targetsTable(c config, rows []*row) *table {
	var algs []*row
	head := []string{"target"}
	for _, r := range rows {
		if r.alg != "" {
			algs = append(algs, r)
			head = append(head, r.name)
		}
	}
	t := newTable(head...)
	t.left[0] = true
	base := rows[0].ceiling().UsecCall
	cells := func(name string, f func(r *row) string) {
		line := []string{name}
		for _, r := range algs {
			line = append(line, f(r))
		}
		t.add(line...)
	}
	cells(fmt.Sprintf("Redis µs/call ≤ %.1f× baseline", targetUSRatio), func(r *row) string {
		v := r.ceiling().UsecCall / base
		return verdict(fmt.Sprintf("%.2f×", v), v <= targetUSRatio)
	})
	cells(fmt.Sprintf("limiter pipelined ≥ %.0f%% of ceiling (%d callers; %d callers)", 100*targetPipelined, c.wideCallers, c.callers),
		func(r *row) string {
			v, narrow := load.Median(r.wide).PerSec/r.ceiling().PerSec, load.Median(r.direct).PerSec/r.ceiling().PerSec
			return fmt.Sprintf("%s (%.0f%%)", verdict(fmt.Sprintf("%.0f%%", 100*v), v >= targetPipelined), 100*narrow)
		})
	cells(fmt.Sprintf("≤ %d B per identity (TokenBucket, GCRA; 49-/31-char key)", targetBytes), func(r *row) string {
		if r.alg != limiter.TokenBucket && r.alg != limiter.GCRA {
			return fmt.Sprintf("%.0f / %.0f (no target)", r.bytesLong, r.bytesShort)
		}
		return fmt.Sprintf("%s / %s", verdict(fmt.Sprintf("%.0f", r.bytesLong), r.bytesLong <= targetBytes),
			verdict(fmt.Sprintf("%.0f", r.bytesShort), r.bytesShort <= targetBytes))
	})
	cells(fmt.Sprintf("gRPC ≥ %.0f%% of ceiling, p99 ≤ %s", 100*targetGRPC, targetGRPCP99), func(r *row) string {
		g := load.Median(r.grpc)
		v := g.PerSec / r.ceiling().PerSec
		return verdict(fmt.Sprintf("%.0f%%, %s", 100*v, dur(g.P99)), v >= targetGRPC && g.P99 <= targetGRPCP99)
	})
	cells("over-admission = 0", func(r *row) string {
		return verdict(overCell(r.over), r.over.runs > 0 && r.over.excess() <= 0)
	})
	return t
}

// otherLoad is "median M (at most X)" of the runs' other load, or "" when unknown.
func otherLoad(runs []load.Stats) string {
	var known []float64
	for _, s := range runs {
		if s.OtherLoad >= 0 {
			known = append(known, s.OtherLoad)
		}
	}
	if len(known) == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%% (median; at most %.0f%%)", 100*load.MedianOf(known, func(f float64) float64 { return f }), 100*slices.Max(known))
}

func verdict(v string, met bool) string {
	if met {
		return v + " met"
	}
	return v + " MISSED"
}

func printController(p func(string, ...any), res controllerResult) {
	p("### Controller: bulk apply\n\n")
	switch {
	case !res.ran && res.skipped == "":
		p("Not run (-controller=false).\n\n")
		return
	case !res.ran:
		p("Skipped: %s.\n\n", res.skipped)
		return
	case res.err != nil && len(res.metrics) == 0:
		p("Failed: %s.\n\n", firstLine(res.err.Error()))
		return
	}
	t := newTable("policies", "namespaces", "time to all Ready", "largest snapshot", "ConfigMap writes",
		"API requests per policy", "API writes per policy", "go test, build included")
	m := res.metrics
	t.add("1000", "50", fmt.Sprintf("%.2f s", m["s-to-all-ready"]), fmt.Sprintf("%.0f B", m["snapshot-bytes-max"]),
		fmt.Sprintf("%.0f", m["configmap-writes"]), fmt.Sprintf("%.2f", m["api-requests/policy"]),
		fmt.Sprintf("%.2f", m["api-writes/policy"]), res.wall.Round(time.Second).String())
	p("BenchmarkBulkApply (test/integration/controller): 1000 RateLimitPolicies in 50 namespaces created at once against a manager "+
		"on a real kube-apiserver + etcd and redis-server in the same machine; time until every policy is Ready, and the largest snapshot ConfigMap.\n\n%s\n", t)
	if res.detail != "" {
		p("Its summary: %s.\n\n", strings.TrimSuffix(res.detail, "."))
	}
	if res.err != nil {
		p("Failed: %s.\n\n", firstLine(res.err.Error()))
	}
}

func printCluster(p func(string, ...any), c config, rep *report) {
	if len(rep.cluster) == 0 && rep.clusterErr == nil {
		return
	}
	p("### Redis Cluster: scale with primaries\n\n")
	var counts []string
	for _, r := range rep.cluster {
		counts = append(counts, fmt.Sprint(r.primaries))
	}
	p("The limiter column's load (TokenBucket, pipelined, %d callers over %d identities, whose hash tags spread them over all 16384 slots) "+
		"on a fresh Cluster of %s primaries on loopback; %s. Redis µs/call sums INFO commandstats over the primaries "+
		"(total µs in EVALSHA / total calls); Redis CPU/call is their INFO cpu over the same calls; other load is the share of the machine's CPU "+
		"other processes used meanwhile.\n\n", c.callers, c.identities, strings.Join(counts, ", "), medianOf(c))
	p("On this %d-CPU machine every primary, the generator and the limiter share the same CPUs, so decisions/s shows the ceiling of this box, "+
		"not of a cluster: with a core per primary it would grow with the primaries. A Cluster adds no work inside the script, so with a core each "+
		"Redis µs/call would stay flat; here it is wall-clock time, which grows when a primary is preempted mid-script, and each primary gets 1/N "+
		"of every pipeline, so it reads and writes more often per call (Redis CPU/call).\n\n", rep.machine.cpus)
	if len(rep.cluster) > 0 {
		t := newTable("primaries", "limiter /s (pipelined)", fmt.Sprintf("vs %d primary", rep.cluster[0].primaries), "p50", "p99", "Redis µs/call (commandstats)",
			"Redis CPU/call (INFO cpu)", "busiest primary's share of calls", "other load")
		base := load.Median(rep.cluster[0].runs).PerSec
		for _, r := range rep.cluster {
			s := load.Median(r.runs)
			t.add(fmt.Sprint(r.primaries), rate(s), fmt.Sprintf("%.2f×", s.PerSec/base), dur(s.P50), dur(s.P99),
				fmt.Sprintf("%.2f", r.stat.UsecPerCall()),
				fmt.Sprintf("%.1f µs", float64(r.cpu)/float64(max(r.stat.Calls, 1))/float64(time.Microsecond)),
				fmt.Sprintf("%.0f%%", 100*r.busiest), percent(s.OtherLoad))
		}
		p("%s\n", t)
	}
	if rep.clusterErr != nil {
		p("Failed: %s.\n\n", firstLine(rep.clusterErr.Error()))
	}
}

func percent(f float64) string {
	if f < 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func rate(s load.Stats) string {
	if s.PerSec == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", s.PerSec)
}

func share(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

func overCell(o overResult) string {
	switch {
	case o.runs == 0:
		return "—"
	case o.excess() > 0:
		return fmt.Sprintf("+%d", o.excess())
	default:
		return fmt.Sprint(o.excess())
	}
}

// table is a markdown table whose columns are padded, so it reads in a terminal as well.
type table struct {
	head []string
	left []bool // left-aligned columns; the rest are right-aligned
	rows [][]string
}

func newTable(head ...string) *table {
	return &table{head: head, left: make([]bool, len(head))}
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	widths := make([]int, len(t.head))
	for _, line := range append([][]string{t.head}, t.rows...) {
		for i, c := range line {
			widths[i] = max(widths[i], utf8.RuneCountInString(c), 3)
		}
	}
	var b strings.Builder
	line := func(cells []string, pad func(i int, c string) string) {
		b.WriteString("|")
		for i := range t.head {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + pad(i, c) + " |")
		}
		b.WriteString("\n")
	}
	fill := func(i int, c string) string {
		gap := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
		if t.left[i] {
			return c + gap
		}
		return gap + c
	}
	line(t.head, fill)
	line(nil, func(i int, _ string) string {
		if t.left[i] {
			return strings.Repeat("-", widths[i])
		}
		return strings.Repeat("-", widths[i]-1) + ":"
	})
	for _, r := range t.rows {
		line(r, fill)
	}
	return b.String()
}

// printGateways prints forward auth through real Caddy and nginx beside the direct upstream.
func printGateways(p func(string, ...any), c config, rep *report) {
	if !c.gateways {
		return
	}
	p("### Forward auth through real proxies\n\n")
	if rep.gatewayErr != nil {
		p("not measured: %s\n\n", firstLine(rep.gatewayErr.Error()))
		return
	}
	p("%s\n", rep.gateways.Markdown())
}
