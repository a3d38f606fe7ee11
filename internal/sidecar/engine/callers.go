package engine

import (
	"context"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// CallersStep runs one step of a listing of the identities holding counters of r's policy
// now, count keys examined from at (limiter.CallersStep).
func (g *Engine) CallersStep(ctx context.Context, r *Rule, at limiter.ScanPosition, count int) (limiter.CallersStep, error) {
	lim := g.limiter()
	if lim == nil {
		return limiter.CallersStep{}, ErrNoRedisYet
	}
	return lim.CallersStep(ctx, r.def.Policy, at, count)
}

// KeyCount is how many keys Redis holds (limiter.KeyCount).
func (g *Engine) KeyCount(ctx context.Context) (int64, error) {
	lim := g.limiter()
	if lim == nil {
		return 0, ErrNoRedisYet
	}
	return lim.KeyCount(ctx)
}
