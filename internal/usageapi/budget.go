package usageapi

import (
	"context"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// The Redis work of one overview is bounded whatever the server holds: a SCAN examines
// keys of every tenant, and before this budget one overview of a policy with 22 callers
// scanned the whole keyspace (1,000 SCANs and 470 to 620 ms of Redis's one thread with a
// million keys of another tenant) and then peeked up to 100,000 callers.
//
// What each call costs Redis, measured with INFO commandstats (usec per call) on
// redis-server 7.0.15 on a 2-core machine shared with other work:
//
//   - SCAN with a policy's MATCH pattern over 1,000,000 keys of another tenant: 110 µs at
//     COUNT 100, 260 µs at 250, 482 µs at 500, 907 µs at 1000 (0.96 µs per key examined on
//     a busy machine, 0.56 µs on a quiet one: the MATCH is tried on every key, whichever
//     tenant holds it).
//   - a peek (the peek script, one call per shard): 4.9 to 5.8 µs with 1 limit, 7.1 to 7.7
//     with 2, 15.8 to 30.3 with 8, over the four algorithms.
//
// The model below bounds both from above: a SCAN step costs scanStepMicros plus
// scanKeyMicros per key asked for (COUNT 500: 520 µs, so each call stays under 1 ms), a
// peek costs peekCallMicros plus peekLimitMicros per limit, per shard (1 limit: 6.5 µs,
// 8 limits: 31 µs). An overview spends at most budgetMicros by that model: 25 ms, half the
// 50 ms an overview may cost, which leaves room for a slower or busier server and for the
// protocol work INFO commandstats does not count. Scanning stops when what is left of the
// budget would not peek the callers the next step might find (a step of COUNT c finds at
// most about c callers). So with few callers of the policy among many keys an overview
// examines about 24,000 keys (measured: 13 to 16 ms of Redis with a million foreign keys);
// when the policy's keys are most of the keyspace, it reads about 2,000 callers of a
// policy of 2 limits.
const (
	budgetMicros    = 25_000
	scanCount       = 500
	scanStepMicros  = 20
	scanKeyMicros   = 1
	peekCallMicros  = 3
	peekLimitMicros = 3.5
	// minScanCount is the smallest step worth a round trip: when the budget affords fewer
	// keys, the overview ends.
	minScanCount = 10
	// maxScanSteps bounds the round trips of one overview (a small max makes small steps).
	maxScanSteps = 200
)

// scanResult is what the scan part of an overview found: the callers (each once), the
// keys whose identity is a digest, about how many keys it examined, and where the next
// overview goes on (done: nowhere, the keyspace ended).
type scanResult struct {
	identities []string
	unreadable int
	examined   int64
	next       limiter.ScanPosition
	done       bool
}

// scanWithin finds callers of rule from at, about maxCallers at most, in SCAN steps whose
// cost and the peeks of what they find stay within budgetMicros, peekMicros being one
// caller's, and at most maxScanSteps of them. A step asks for no more keys than callers are
// still wanted, so maxCallers is exceeded only by the few keys a SCAN returns beyond its
// COUNT (it returns whole hash buckets).
func scanWithin(ctx context.Context, g *engine.Engine, rule *engine.Rule, at limiter.ScanPosition, maxCallers int, peekMicros float64) (scanResult, error) {
	res := scanResult{next: at}
	seen := map[string]bool{}
	spent := 0.0
	for steps := 0; steps < maxScanSteps; steps++ {
		left := budgetMicros - spent - float64(len(res.identities))*peekMicros - scanStepMicros
		affordable := int(left / (scanKeyMicros + peekMicros))
		count := min(scanCount, maxCallers-len(res.identities), affordable)
		if affordable < minScanCount || count < 1 {
			break
		}
		step, err := g.CallersStep(ctx, rule, res.next, count)
		if err != nil {
			return res, err
		}
		spent += scanStepMicros + scanKeyMicros*float64(count)
		res.examined += int64(count)
		res.unreadable += step.Unreadable
		for _, id := range step.Identities {
			if !seen[id] {
				seen[id] = true
				res.identities = append(res.identities, id)
			}
		}
		res.next, res.done = step.Next, step.Done
		if res.done {
			break
		}
	}
	return res, nil
}

// peekMicros is what peeking one caller of rule costs Redis by the model: against asked, or
// when nil against the costliest tier a caller may have.
func peekMicros(rule *engine.Rule, asked *engine.Tier) float64 {
	tiers := rule.AllTiers()
	if asked != nil {
		tiers = []*engine.Tier{asked}
	}
	most := 0.0
	for _, t := range tiers {
		p := t.Policy
		most = max(most, float64(p.PeekCalls())*(peekCallMicros+peekLimitMicros*float64(len(p.Limits))))
	}
	return most
}
