package engine

import (
	"context"
	"fmt"
)

// Release results, as ratelimit_sidecar_slot_releases_total labels them.
const (
	// ReleaseFreed: the slot was held and is given back.
	ReleaseFreed = "freed"
	// ReleaseGone: the slot was no longer held (released before, or expired).
	ReleaseGone = "gone"
	// ReleaseFailed: Redis did not answer; the slot comes back when it expires.
	ReleaseFailed = "failed"
)

// HoldsSlot reports whether o is an admission that holds a slot of its policy's concurrency
// limit, to give back with Release when its request ends.
func (o *Outcome) HoldsSlot() bool { return o.reserved.slot != "" }

// Slot is the slot o's admission holds, when it HoldsSlot.
func (o *Outcome) Slot() string { return o.reserved.slot }

// Release gives back the slot o's admission holds (limiter.Release), when its request has
// ended; an outcome that holds none changes nothing. It reports whether the slot was still
// held. A slot Redis cannot be asked to give back comes back when it expires
// (concurrency.slotTTL). front names the front, for metrics.
func (g *Engine) Release(ctx context.Context, front string, o *Outcome) (bool, error) {
	if !o.HoldsSlot() {
		return false, nil
	}
	lim := g.limiter()
	if lim == nil {
		g.Metrics.released(front, o, ReleaseFailed)
		return false, ErrNoRedisYet
	}
	held, err := lim.Release(ctx, o.Tier.Policy, o.reserved.identity, o.reserved.slot)
	switch {
	case err != nil:
		g.Metrics.released(front, o, ReleaseFailed)
		return false, fmt.Errorf("release a slot of policy %s: %w", o.Rule.Name(), err)
	case held:
		g.Metrics.released(front, o, ReleaseFreed)
	default:
		g.Metrics.released(front, o, ReleaseGone)
	}
	return held, nil
}

// Holding is the admission of c on r that holds slot, for a front that releases apart from
// its answer (the check API's release call).
func (r *Rule) Holding(c Check, slot string) Outcome {
	o := r.admitted(c)
	o.reserved.slot = slot
	return o
}
