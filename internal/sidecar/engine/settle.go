package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Settlement results, as ratelimit_sidecar_settlements_total labels them.
const (
	// SettleCharged: the response cost more than its reservation; the rest was debited.
	SettleCharged = "charged"
	// SettleUnreserved: it cost less; the difference was given back.
	SettleUnreserved = "unreserved"
	// SettleExact: it cost its reservation; nothing changed but the reservation, consumed.
	SettleExact = "exact"
	// SettleUnstated: the response stated no cost; the reservation stands (consumed as
	// exact).
	SettleUnstated = "unstated"
	// SettleFailed: Redis did not settle (unreachable, or an error); the reservation stands.
	SettleFailed = "failed"
	// SettleRefused: the settlement named no reservation of its caller and policy (never
	// made, expired, settled before) or one settled before at another cost: nothing changed.
	SettleRefused = "refused"
)

// Reservation failures, as ratelimit_sidecar_reservations_total labels them.
const (
	// ReserveRecorded: the admission's reservation is recorded; its response may settle it.
	ReserveRecorded = "recorded"
	// ReserveFailed: Redis did not record it; the reservation stands and cannot be settled.
	ReserveFailed = "failed"
)

// Settles reports whether o is an admission whose cost its response settles: its policy
// has cost.settle, Redis debited the reservation (not a replay, a peek or a failure mode's
// answer without Redis, which debited nothing to settle), and recorded it (Reserve).
func (o *Outcome) Settles() bool { return o.reserved.id != "" }

// SettleSource is where o's policy reads the cost from the response, or nil.
func (o *Outcome) SettleSource() *snapshot.CostSettle { return o.Rule.Entry.Cost.Settle }

// Reserved is the cost o's admission debited, when it Settles.
func (o *Outcome) Reserved() int64 { return o.reserved.cost }

// Reservation is the id of o's reservation, when it Settles: what a settlement names.
func (o *Outcome) Reservation() string { return o.reserved.id }

// reserve records o's admission, which debited cost after its check began, so that its
// response can settle it: a reservation Redis cannot record leaves o not Settling (its
// reservation stands).
func (g *Engine) reserve(ctx context.Context, front string, o *Outcome, cost int64, began time.Time) {
	lim := g.limiter()
	if lim == nil {
		return
	}
	id, err := lim.Reserve(ctx, o.Tier.Policy, o.reserved.identity, cost, time.Since(began))
	if err != nil {
		g.Metrics.reserved(front, o, ReserveFailed)
		return
	}
	o.reserved.id, o.reserved.cost = id, cost
	g.Metrics.reserved(front, o, ReserveRecorded)
}

// Settle replaces o's reservation with cost, the cost its response stated, on the policy
// (tier, override) its check counted against (limiter.Settle). stated false records that
// the response stated none: the reservation stands, and its record is consumed as an exact
// settlement. An outcome that does not Settle changes nothing. front names the front, for
// metrics.
func (g *Engine) Settle(ctx context.Context, front string, o *Outcome, cost int64, stated bool) (limiter.Settled, error) {
	if !o.Settles() {
		return limiter.Settled{}, nil
	}
	result := SettleUnstated
	if stated {
		result = SettleResult(o.reserved.cost, cost)
	} else {
		cost = o.reserved.cost
	}
	out, err := g.settle(ctx, o, min(cost, limiter.MaxAdjustAmount))
	if err != nil {
		g.Metrics.settled(front, o, settleFailure(err), cost)
		return out, fmt.Errorf("settle policy %s: %w", o.Rule.Name(), err)
	}
	g.Metrics.settled(front, o, result, cost)
	return out, nil
}

// SettleReservation settles the reservation id that an admission of c on r recorded (the
// check API's settle call: the caller names its check and the reservation its answer
// carried) at cost. The reservation is bound to the caller, policy and tier it was made for:
// naming another finds none (limiter.ErrNoReservation). The answer says what the
// reservation held.
func (g *Engine) SettleReservation(ctx context.Context, front string, r *Rule, c Check, id string, cost int64) (limiter.Settled, error) {
	o := r.admitted(c)
	o.reserved.id = id
	out, err := g.settle(ctx, &o, cost)
	if err != nil {
		g.Metrics.settled(front, &o, settleFailure(err), cost)
		return out, fmt.Errorf("settle policy %s: %w", r.Name(), err)
	}
	g.Metrics.settled(front, &o, SettleResult(out.Reserved, cost), cost)
	return out, nil
}

// settle is limiter.Settle of o's reservation at cost.
func (g *Engine) settle(ctx context.Context, o *Outcome, cost int64) (limiter.Settled, error) {
	lim := g.limiter()
	if lim == nil {
		return limiter.Settled{}, ErrNoRedisYet
	}
	return lim.Settle(ctx, o.Tier.Policy, limiter.Settlement{Identity: o.reserved.identity, Reservation: o.reserved.id, Cost: cost})
}

// settleFailure names a failed settlement for metrics: refused (the caller's mistake, or an
// attempt: nothing failed) or failed.
func settleFailure(err error) string {
	if errors.Is(err, limiter.ErrNoReservation) || errors.Is(err, limiter.ErrAdjustReused) {
		return SettleRefused
	}
	return SettleFailed
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

// CountsWithoutIdentity reports whether r counts a request without an identity, as one
// caller shared by all such requests (identity.onMissing Shared), rather than skipping or
// rejecting it.
func (r *Rule) CountsWithoutIdentity() bool {
	m := r.Entry.Identity.OnMissing
	return m != snapshot.MissingSkip && m != snapshot.MissingReject
}

// DescriptorCaller is the caller an Envoy descriptor's entries name under r, as a check of
// them counts it: its identity, "" for the one shared caller of requests without one, and
// false when r counts such a request as no caller (skipped or rejected).
func (r *Rule) DescriptorCaller(entries []requestread.DescriptorEntry) (string, bool) {
	if id, ok := requestread.DescriptorIdentity(&r.Entry, entries); ok {
		return id, true
	}
	return "", r.CountsWithoutIdentity()
}

// Caller is the caller o's admission counted against: its identity, "" for the one shared
// caller of requests without one.
func (o *Outcome) Caller() string { return o.reserved.identity }
