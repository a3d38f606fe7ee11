package engine

import (
	"context"
	"errors"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// ErrNoIdentity is the error of an adjustment that names no caller.
var ErrNoIdentity = errors.New("identity: name the caller (or its parts) whose counters change")

// Adjust resets, refunds or grants the counters of c's caller under r, on the policy a check
// of c would count against (its tier's, an override's), as limiter.Adjust does: a.Identity
// is c's identity. Returns the tier adjusted with the answer.
func (g *Engine) Adjust(ctx context.Context, r *Rule, c Check, a limiter.Adjustment) (*Tier, limiter.Adjusted, error) {
	if !c.HasIdentity {
		return nil, limiter.Adjusted{}, ErrNoIdentity
	}
	t := c.Tier
	if t == nil {
		t = &r.def
	}
	lim := g.limiter()
	if lim == nil {
		return nil, limiter.Adjusted{}, ErrNoRedisYet
	}
	a.Identity = c.Identity
	out, err := lim.Adjust(ctx, t.Policy, a)
	return t, out, err
}
