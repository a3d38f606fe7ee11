package app

import (
	"context"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
)

// startTracing turns tracing on when the OTEL_* environment asks for it (tracing.Decide) and
// returns what flushes the spans not yet exported: Run calls it once the fronts have
// drained. A setting the sidecar cannot honour is logged and leaves tracing off: tracing
// never stops the sidecar from serving.
func (a *App) startTracing(ctx context.Context) (flush func()) {
	log := a.cfg.Log.WithName("tracing")
	shutdown, err := tracing.Setup(ctx, log)
	if err != nil {
		log.Error(err, "tracing stays off")
	}
	return func() {
		// ctx has ended by now (SIGTERM): the flush has its own deadline
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			log.Error(err, "spans lost on shutdown")
		}
	}
}
