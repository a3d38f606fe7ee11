package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Engine decides checks for every front: identity rules, shadow mode and metrics around the
// limiter. Safe for concurrent use.
type Engine struct {
	// Store holds the snapshot in force.
	Store *Store
	// Metrics, when set, records every decision.
	Metrics *Metrics

	// lim asks Redis (and applies each policy's failure mode); nil until SetLimiter.
	lim atomic.Pointer[limiter.Limiter]
}

// ErrNoRedisYet is the error of decisions made before the Redis client exists: the fronts
// serve as soon as the snapshot is known, Redis only once the snapshot names it.
var ErrNoRedisYet = errors.New("no redis client yet: waiting for a snapshot naming redis")

// SetLimiter installs the limiter that asks Redis. It is the one way to give the engine a
// limiter: the fronts may serve before Redis is known (the first snapshot names it), and
// until then every decision is ErrNoRedisYet's failure mode.
func (g *Engine) SetLimiter(l *limiter.Limiter) { g.lim.Store(l) }

func (g *Engine) limiter() *limiter.Limiter { return g.lim.Load() }

// Check is one request against one policy.
type Check struct {
	// Identity is the caller's identity, when HasIdentity.
	Identity string
	// HasIdentity is false when no identity source yielded a value.
	HasIdentity bool
	// Cost is the weight; already validated against the policy.
	Cost int64
	// RequestID makes the check idempotent when the policy has idempotency.
	RequestID string
	// Fingerprint describes the request a RequestID stands for (method, host, path and
	// query on HTTP; domain and descriptor entries on Envoy): a seen id replays only for
	// the same request.
	Fingerprint string
	// Tier is the tier whose limits apply; nil is the rule's default tier.
	Tier *Tier
	// Peek decides the request as a check would and debits nothing (limiter.Peek): no
	// lease, no idempotency record, no deny cache; RequestID is ignored.
	Peek bool
	// Settles says the front settles an admission's cost from its response (the reverse
	// proxy, the check API, Envoy RLS with a request id): an admission of a policy with
	// cost.settle is then reserved in Redis (Outcome.Settles), what the settlement names.
	// A front that never sees the response leaves it false: its reservation just stands.
	Settles bool
}

// Outcome is a policy's answer to one request.
type Outcome struct {
	// Rule is the policy.
	Rule *Rule
	// Tier is the tier of the policy whose limits were checked.
	Tier *Tier
	// Decision is the limiter's answer (zero when Skipped or Rejected).
	Decision limiter.Decision
	// Allowed is the final answer: the decision, or true for shadow policies and Skipped.
	Allowed bool
	// Shadowed is true when the limiter denied but the policy is in shadow mode.
	Shadowed bool
	// Skipped is true when the request had no identity and the policy counts none (Skip).
	Skipped bool
	// Rejected is true when the request had no identity and the policy rejects it (Reject).
	Rejected bool
	// At, for a tier with calendar limits, is when Redis decided by the server's clock as the
	// limiter knows it: the present that picks the calendar windows reported. Zero otherwise.
	At time.Time
	// Peeked is true for the outcome of a peek (Check.Peek): nothing was debited, and
	// Decision.Remaining is what the reported limit holds before the request.
	Peeked bool
	// State is, for a peek Redis answered, every limit of the tier as it holds now.
	State []limiter.LimitState
	// reserved is what the end of an admitted request settles or releases: for a policy
	// whose cost its response settles (Settles), the reservation recorded; for a policy with
	// a concurrency limit (HoldsSlot), the slot taken; and the identity.
	reserved reservation
}

// reservation is what a settlement or a release needs of its admission: the identity, and
// the reservation's id and cost (Settles) or the slot (HoldsSlot).
type reservation struct {
	identity string
	id       string
	cost     int64
	slot     string
}

// Limits are the limits of the outcome's tier, as published.
func (o *Outcome) Limits() []snapshot.Limit {
	if o.Tier == nil {
		return o.Rule.Entry.Limits
	}
	return o.Tier.Limits
}

// Result names the outcome for metrics and logs.
func (o *Outcome) Result() string {
	switch {
	case o.Skipped:
		return "skipped"
	case o.Rejected:
		return "rejected"
	case o.Shadowed:
		return "shadow_denied"
	case o.Allowed:
		return "allowed"
	}
	return "denied"
}

// Decide checks one request against one policy. front names the front asking, for metrics.
// An admission of a policy whose cost its response settles is reserved (Settles) before
// Decide returns.
func (g *Engine) Decide(ctx context.Context, front string, r *Rule, c Check) Outcome {
	start := time.Now()
	var o Outcome
	if t := tracing.Tracer(); t != nil {
		o = g.decideTraced(ctx, t, front, r, c)
	} else {
		o = g.decideMetered(ctx, front, r, c, start)
	}
	if cost := o.reserved.cost; cost > 0 {
		o.reserved.cost = 0 // until Redis records it
		g.reserve(ctx, front, &o, cost, start)
	}
	return o
}

// decideMetered is Decide without tracing: the decision and its metrics.
func (g *Engine) decideMetered(ctx context.Context, front string, r *Rule, c Check, start time.Time) Outcome {
	o := g.decide(ctx, r, c)
	g.Metrics.decided(front, &o, time.Since(start))
	return o
}

func (g *Engine) decide(ctx context.Context, r *Rule, c Check) Outcome {
	o := Outcome{Rule: r, Tier: c.Tier}
	if o.Tier == nil {
		o.Tier = &r.def
	}
	if !c.HasIdentity {
		switch r.Entry.Identity.OnMissing {
		case snapshot.MissingSkip:
			o.Skipped, o.Allowed = true, true
			return o
		case snapshot.MissingReject:
			o.Rejected = true
			return o
		}
		c.Identity = "" // Shared: one identity no source can yield (sources yield non-empty values)
	}
	req := limiter.Request{Identity: c.Identity, Cost: c.Cost, RequestID: c.RequestID, Fingerprint: c.Fingerprint}
	if o.Tier.Policy.Concurrency != nil && !c.Peek {
		req.Slot = limiter.NewID()
	}
	g.ask(ctx, &o, req, c.Peek)
	o.Allowed = o.Decision.Allowed
	if o.Decision.Allowed && !o.Decision.Replayed && !o.Decision.WithoutRedis() && !c.Peek {
		o.reserve(c, req.Slot)
	}
	if !o.Allowed && r.Entry.Shadow {
		o.Allowed, o.Shadowed = true, true
	}
	return o
}

// ask has the limiter decide req on o's tier: a check, or a peek, or without Redis the
// failure mode when the engine has no limiter yet.
func (g *Engine) ask(ctx context.Context, o *Outcome, req limiter.Request, peek bool) {
	lim := g.limiter()
	switch {
	case lim == nil:
		o.Decision = o.Tier.Policy.WithoutRedis(req, ErrNoRedisYet)
	case peek:
		pk := lim.Peek(ctx, o.Tier.Policy, req)
		o.Decision, o.State = pk.Decision, pk.Limits
	default:
		o.Decision = lim.Check(ctx, o.Tier.Policy, req)
	}
	o.Peeked = peek
	if lim != nil && o.Tier.Policy.HasCalendar() {
		o.At = lim.Now()
	}
}

// reserve notes what the end of o's admitted request settles (c's cost, when the policy's
// cost settles from the response: Decide then records it) or releases (slot, when it took
// one).
func (o *Outcome) reserve(c Check, slot string) {
	o.reserved.identity, o.reserved.slot = c.Identity, slot
	if o.Rule.Entry.Cost.Settle != nil && c.Settles {
		o.reserved.cost = c.Cost
	}
}

// DecideAll checks a request against rules in order, checks[i] against rules[i], and stops
// at the first denial, so a denied request is not debited from the rules after it (a peek,
// which debits nothing, goes on, so every policy is reported). The outcomes are those
// checked.
func (g *Engine) DecideAll(ctx context.Context, front string, rules []*Rule, checks []Check) []Outcome {
	out := make([]Outcome, 0, len(rules))
	for i, r := range rules {
		o := g.Decide(ctx, front, r, checks[i])
		out = append(out, o)
		if !o.Allowed && !o.Peeked {
			break
		}
	}
	return out
}

// Denial is the outcome that denied the request, or nil when it is allowed.
func Denial(outs []Outcome) *Outcome {
	for i := range outs {
		if !outs[i].Allowed {
			return &outs[i]
		}
	}
	return nil
}
