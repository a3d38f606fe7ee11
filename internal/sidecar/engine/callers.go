package engine

import (
	"context"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// Callers lists the identities holding counters of r's policy now (limiter.Callers), at most
// max.
func (g *Engine) Callers(ctx context.Context, r *Rule, max int) (limiter.Callers, error) {
	lim := g.limiter()
	if lim == nil {
		return limiter.Callers{}, ErrNoRedisYet
	}
	return lim.Callers(ctx, r.def.Policy, max)
}
