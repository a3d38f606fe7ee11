package engine

import (
	"context"
	"time"
)

// DecideUntraced is Decide as it was before tracing: no tracing check at all, the baseline
// of the benchmarks that price tracing.
func (g *Engine) DecideUntraced(ctx context.Context, front string, r *Rule, c Check) Outcome {
	return g.decideMetered(ctx, front, r, c, time.Now())
}
