package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Settlement results, as ratelimit_sidecar_settlements_total labels them.
const (
	// SettleCharged: the response cost more than its reservation; the rest was debited.
	SettleCharged = "charged"
	// SettleUnreserved: it cost less; the difference was given back.
	SettleUnreserved = "unreserved"
	// SettleExact: it cost its reservation; nothing to do.
	SettleExact = "exact"
	// SettleUnstated: the response stated no cost; the reservation stands.
	SettleUnstated = "unstated"
	// SettleFailed: Redis did not settle (unreachable, or an error); the reservation stands.
	SettleFailed = "failed"
)

// Settles reports whether o is an admission whose cost its response settles: its policy
// has cost.settle, and Redis debited the reservation (not a replay, a peek or a failure
// mode's answer without Redis, which debited nothing to settle).
func (o *Outcome) Settles() bool { return o.reserved.cost > 0 }

// SettleSource is where o's policy reads the cost from the response, or nil.
func (o *Outcome) SettleSource() *snapshot.CostSettle { return o.Rule.Entry.Cost.Settle }

// Reserved is the cost o's admission debited, when it Settles.
func (o *Outcome) Reserved() int64 { return o.reserved.cost }

// ReservedAt is when o's check began, when it Settles.
func (o *Outcome) ReservedAt() time.Time { return o.reserved.at }

// Settle replaces o's reservation with cost, the cost its response stated, on the policy
// (tier, override) its check counted against, idempotent by requestID (limiter.Settle).
// stated false records that the response stated none: the reservation stands, nothing is
// called. An outcome that does not Settle changes nothing. front names the front, for
// metrics.
func (g *Engine) Settle(ctx context.Context, front string, o *Outcome, cost int64, stated bool, requestID string) (limiter.Adjusted, error) {
	if !o.Settles() {
		return limiter.Adjusted{}, nil
	}
	if !stated {
		g.Metrics.settled(front, o, SettleUnstated, 0)
		return limiter.Adjusted{}, nil
	}
	result := SettleResult(o.reserved.cost, cost)
	lim := g.limiter()
	switch {
	case lim == nil:
		g.Metrics.settled(front, o, SettleFailed, cost)
		return limiter.Adjusted{}, ErrNoRedisYet
	case result == SettleExact:
		g.Metrics.settled(front, o, result, cost)
		return limiter.Adjusted{}, nil
	}
	out, err := lim.Settle(ctx, o.Tier.Policy, limiter.Settlement{Identity: o.reserved.identity,
		Reserved: o.reserved.cost, Cost: min(cost, limiter.MaxAdjustAmount), RequestID: requestID,
		Since: max(0, time.Since(o.reserved.at))})
	if err != nil {
		if !errors.Is(err, limiter.ErrAdjustReused) { // the caller's mistake: nothing failed
			g.Metrics.settled(front, o, SettleFailed, cost)
		}
		return out, fmt.Errorf("settle policy %s: %w", o.Rule.Name(), err)
	}
	g.Metrics.settled(front, o, result, cost)
	return out, nil
}

// SettleResult names a settlement of a reservation at cost: charged, unreserved or exact.
func SettleResult(reserved, cost int64) string {
	switch {
	case cost > reserved:
		return SettleCharged
	case cost < reserved:
		return SettleUnreserved
	}
	return SettleExact
}

// Reservation is the admission of c on r that a front settles apart from its answer (the
// check API's settle call): c.Cost debited at at, on c's tier. It Settles when r's cost
// settles from the response and c names a caller (or r counts requests without one as one
// caller).
func (r *Rule) Reservation(c Check, at time.Time) Outcome {
	o := r.admitted(c)
	missing := r.Entry.Identity.OnMissing
	o.reserved.at = at
	if r.Entry.Cost.Settle != nil && (c.HasIdentity || missing != snapshot.MissingSkip && missing != snapshot.MissingReject) {
		o.reserved.cost = c.Cost
	}
	return o
}

// admitted is an admission of c on r, on c's tier, its identity as decide counts it (one
// shared identity without one), reserving nothing yet.
func (r *Rule) admitted(c Check) Outcome {
	o := Outcome{Rule: r, Tier: c.Tier, Allowed: true}
	if o.Tier == nil {
		o.Tier = &r.def
	}
	if c.HasIdentity {
		o.reserved.identity = c.Identity
	}
	return o
}
