package main

import (
	"fmt"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/failover"
)

// printFCallReplicas is the section of issue 25: the tenant call path, leases across a
// failover, and the cost of the acknowledgement of leases.
func printFCallReplicas(p func(string, ...any), c config, rep *report) {
	f := rep.fcall
	if f == nil {
		return
	}
	p("### Tenant mode and leases with replicas\n\n")
	printCallPaths(p, c, f)
	printFailovers(p, f)
	printAcks(p, c, rep)
	if f.err != nil {
		p("Failed: %s.\n\n", firstLine(f.err.Error()))
	}
}

// printCallPaths is the FCALL against EVALSHA table and the Go limiter's line.
func printCallPaths(p func(string, ...any), c config, f *fcallReplicas) {
	if len(f.paths) == 0 {
		return
	}
	p("**Tenant call path.** Each algorithm's check script through redis-benchmark (-c 50 -P 16, %d calls a run, random identities) as EVALSHA, "+
		"and as FCALL of the same body loaded as a function library (FUNCTION LOAD REPLACE of limiter.Script.Library(), as the manager loads it in tenant mode), "+
		"same keys and arguments; the two alternate, each cell the median of %d runs. Redis µs/call is usec_per_call of cmdstat_evalsha or cmdstat_fcall "+
		"(INFO commandstats), Redis CPU/call is INFO cpu over the run's calls (protocol included).\n\n", callPathCalls(c), max(c.reps, 1))
	t := newTable("algorithm", "EVALSHA µs/call", "FCALL µs/call", "FCALL/EVALSHA", "EVALSHA CPU/call", "FCALL CPU/call",
		"EVALSHA /s", "FCALL /s", "FCALL/EVALSHA")
	t.left[0] = true
	for _, r := range f.paths {
		e, fc := medianCeiling(r.evalsha), medianCeiling(r.fcall)
		t.add(string(r.alg), fmt.Sprintf("%.2f", e.UsecCall), fmt.Sprintf("%.2f", fc.UsecCall), ratio(fc.UsecCall, e.UsecCall),
			micro(e.CPUCall), micro(fc.CPUCall), fmt.Sprintf("%.0f", e.PerSec), fmt.Sprintf("%.0f", fc.PerSec), ratio(fc.PerSec, e.PerSec))
	}
	p("%s\n", t)
	if len(f.functions.off) > 0 {
		off, on := load.Median(f.functions.off), load.Median(f.functions.on)
		p("The Go limiter (the limiter column's load: TokenBucket, pipelined, %d callers over %d identities), Spec.Functions off (EVALSHA, the baseline) "+
			"and on (FCALL), alternating, median of %d runs of %s: %s vs %s decisions/s (%s), p50 %s vs %s, p99 %s vs %s.\n\n",
			c.callers, c.identities, max(c.reps, 1), hotDuration(c), rate(off), rate(on), ratio(on.PerSec, off.PerSec),
			dur(off.P50), dur(on.P50), dur(off.P99), dur(on.P99))
	}
}

// printFailovers is the leases-across-a-failover table.
func printFailovers(p func(string, ...any), f *fcallReplicas) {
	if len(f.failovers) == 0 {
		return
	}
	p("**Leases across a failover with a lagging replica.** A primary and a replica whose link runs through a relay that withholds the replication "+
		"stream (test/support/faultproxy.Link); one identity, L = %d per hour, FailClosed, leases of at most %d units (HotRate 1, Span 5 s); %d checks "+
		"while the link is held, then the primary is killed (SIGKILL), the replica promoted (REPLICAOF NO ONE), and the same limiter, its client now "+
		"dialling the promoted replica, checks until Redis denies. One run per cell, on fresh servers. The leases' excess (with − without) must be 0: "+
		"anything above fails the command. What remains is the bound: the checks Redis decided one by one in the replication lag, counted only by "+
		"the primary that died, are lost with or without leases, as any asynchronously replicated write is.\n\n",
		failover.ScenarioLimit, failover.ScenarioLease, failover.ScenarioLag)
	t := newTable("algorithm", "limit", "admitted without leases", "admitted with leases", "leases' excess", "bound, with or without leases (limit + checks in the lag)")
	t.left[0] = true
	for _, r := range f.failovers {
		t.add(string(r.alg), fmt.Sprint(failover.ScenarioLimit), fmt.Sprint(r.without), fmt.Sprint(r.with), fmt.Sprint(r.excess()),
			fmt.Sprint(failover.ScenarioLimit+failover.ScenarioLag))
	}
	p("%s\n", t)
}

// printAcks is the table of what the replicas' acknowledgement of leases costs.
func printAcks(p func(string, ...any), c config, rep *report) {
	acks := rep.fcall.acks
	if len(acks) == 0 {
		return
	}
	d := hotDuration(c)
	p("**What the acknowledgement of leases costs.** The hot-key section's job (one identity under its limit, %d callers in each of two worker "+
		"processes, the limiter's default lease options) on %s with leases on, against a primary with one replica connected over a healthy loopback "+
		"link (each lease call waits for WAIT 1) and a primary without replicas (WAIT 0 answers at once), alternating; the median run of %d of %s. "+
		"Lease calls/s are the measured run's lease calls (OnLease) over both workers; held counts the leases not acknowledged within AckTimeout over "+
		"all runs (OnUnacknowledged: held units are never spent, Redis decides the identity's checks for a Span); the lease round trip is ROLE, the lease "+
		"script and WAIT in one pipeline as the client sees it (a go-redis hook), the median of the worse worker. The baseline is the first row.\n\n",
		max(c.callers/2, 1), ackAlgorithm, max(c.reps, 1), d)
	t := newTable("primary", "decisions/s", "vs no replica", "p50", "p99", "lease calls/s", "held", "lease round trip p50", "script calls/decision")
	t.left[0] = true
	base := medianHot(acks[0].runs).stats.PerSec
	for _, r := range acks {
		m := medianHot(r.runs)
		var held int64
		for _, run := range r.runs {
			held += run.held
		}
		trip := load.MedianOf(r.runs, func(h hotRun) time.Duration { return h.leaseP50 })
		t.add(r.name, rate(m.stats), ratio(m.stats.PerSec, base), dur(m.stats.P50), dur(m.stats.P99),
			fmt.Sprintf("%.0f", float64(m.leases)/d.Seconds()), fmt.Sprint(held), micro(trip), fmt.Sprintf("%.4f", m.perDecision()))
	}
	p("%s\n", t)
	for _, h := range rep.hot {
		if h.alg == ackAlgorithm && len(h.on) > 0 {
			p("The no-replica row is the hot-key section's %s \"leases /s\" cell measured again: %s decisions/s there.\n\n",
				ackAlgorithm, rate(medianHot(h.on).stats))
		}
	}
}

// micro is d in µs with one decimal, or "—" for 0.
func micro(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f µs", micros(d))
}
