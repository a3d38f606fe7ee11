package main

import (
	"fmt"

	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
)

// printHotKeys is the hot-key section: the hot identity with leases off (today) and on, the
// over-admission check with leases, and cold identities with leases off and on.
func printHotKeys(p func(string, ...any), c config, rep *report) {
	if len(rep.hot) == 0 && rep.hotErr == nil {
		return
	}
	p("### Hot keys: leases (the local tier)\n\n")
	p("One identity (\"celebrity\", under its limit: %s) checked by %d callers in each of two sidecar processes (this binary re-run as "+
		"workers, each with its own Redis client and pipelining limiter), started together; each cell is the median of %d runs of %s. "+
		"Decisions/s is the two processes' sum, p50 and p99 the worse process's. Today is leases off: every check is one script call. "+
		"Script calls per decision are INFO commandstats (EVALSHA + EVAL) over everything the workers did (warm-ups and lease calls included) "+
		"over their decisions.\n\n",
		"10⁹ per 1000 h for the windows, 10⁶/s with a burst of 10⁶ for TokenBucket and GCRA", max(c.callers/2, 1), max(c.reps, 1), hotDuration(c))
	if len(rep.hot) > 0 {
		t := newTable("algorithm", "today /s", "leases /s", "×", "today calls/decision", "leases calls/decision", "fewer calls",
			"today p50", "leases p50", "today p99", "leases p99")
		t.left[0] = true
		for _, h := range rep.hot {
			off, on := medianHot(h.off), medianHot(h.on)
			t.add(string(h.alg), rate(off.stats), rate(on.stats), ratio(on.stats.PerSec, off.stats.PerSec),
				fmt.Sprintf("%.4f", off.perDecision()), fmt.Sprintf("%.4f", on.perDecision()),
				ratio(off.perDecision(), on.perDecision()),
				dur(off.stats.P50), dur(on.stats.P50), dur(off.stats.P99), dur(on.stats.P99))
		}
		p("%s\n", t)
		p("Over-admission with leases on: L = %d per %s, %d callers over two limiters, about 2L checks, worst of %d runs. "+
			"Under-admission is L minus the fewest any run admitted; its bound is 2 × the largest lease taken (the units two sidecars can hold unspent).\n\n",
			c.overLimit, overPeriod, c.overCallers, max(c.reps, 1))
		o := newTable("algorithm", "admitted (most)", "over-admission", "under-admission (worst)", "bound")
		o.left[0] = true
		for _, h := range rep.hot {
			o.add(string(h.alg), fmt.Sprint(h.over.admitted), fmt.Sprint(max(0, h.over.excess())), fmt.Sprint(h.over.limit-h.over.fewest), fmt.Sprint(h.bound))
		}
		p("%s\n", o)
	}
	if len(rep.cold.off) > 0 {
		off, on := load.Median(rep.cold.off), load.Median(rep.cold.on)
		p("Cold identities (the limiter column's load: %d identities, TokenBucket, pipelined, %d callers), leases off and on, alternating runs: "+
			"%s vs %s decisions/s (%s), p50 %s vs %s, p99 %s vs %s.\n\n",
			c.identities, c.callers, rate(off), rate(on), ratio(on.PerSec, off.PerSec), dur(off.P50), dur(on.P50), dur(off.P99), dur(on.P99))
	}
	if rep.hotErr != nil {
		p("Failed: %s.\n\n", firstLine(rep.hotErr.Error()))
	}
	printShards(p, c, rep)
}

// printShards is the global tier's table: one global limit on the 3-primary Cluster.
func printShards(p func(string, ...any), c config, rep *report) {
	if len(rep.shards) == 0 && rep.shardErr == nil {
		return
	}
	p("### Hot keys: a global limit sharded over the 3-primary Cluster\n\n")
	p("One `Fixed` identity (every caller shares one budget), FixedWindow L = %d per %s, 2L checks from %d callers over two limiters "+
		"(each its own Cluster client, pipelining and a deny cache of 10000 as the sidecar's defaults), on a fresh Cluster of 3 primaries: first L checks, where every denial is a false one "+
		"(the budget covers them all), then L more, after which no more than L may have been admitted. Script calls per primary are INFO commandstats "+
		"(EVALSHA + EVAL) on each primary over both. One run.\n\n", 10*c.overLimit, overPeriod, c.callers)
	if len(rep.shards) > 0 {
		t := newTable("configuration", "admitted (2L checks)", "limit", "false denials (first L checks)", "checks/s", "script calls per primary", "busiest primary's share", "calls/check")
		t.left[0], t.left[5] = true, true
		for _, s := range rep.shards {
			var total, busiest int64
			for _, n := range s.perPrimary {
				total += n
				busiest = max(busiest, n)
			}
			t.add(s.name, fmt.Sprint(s.admitted), fmt.Sprint(s.limit), fmt.Sprint(s.falseDenials),
				fmt.Sprintf("%.0f", float64(s.checks)/s.elapsed.Seconds()), fmt.Sprint(s.perPrimary),
				share(float64(busiest), float64(total)), fmt.Sprintf("%.3f", float64(total)/float64(max(s.checks, 1))))
		}
		p("%s\n", t)
	}
	if rep.shardErr != nil {
		p("Failed: %s.\n\n", firstLine(rep.shardErr.Error()))
	}
}

// medianHot is the run with the median throughput (its calls per decision with it).
func medianHot(runs []hotRun) hotRun {
	if len(runs) == 0 {
		return hotRun{}
	}
	m := load.Median(each(runs))
	best := runs[0]
	for _, r := range runs {
		if abs(r.stats.PerSec-m.PerSec) < abs(best.stats.PerSec-m.PerSec) {
			best = r
		}
	}
	return best
}

func each(runs []hotRun) []load.Stats {
	out := make([]load.Stats, len(runs))
	for i, r := range runs {
		out[i] = r.stats
	}
	return out
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// ratio is a / b as "n.nn×", or "—" when either is unknown.
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
