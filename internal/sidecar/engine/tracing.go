package engine

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
)

// decideTraced is Decide while tracing is on: a ratelimit.decide span around the decision,
// child of ctx's span (the front's), and, when Redis answered, an EVALSHA client span under
// it spanning the limiter's call (queueing in a pipeline included). The Redis span is
// derived from the decision rather than from instrumenting the Redis client, so it names no
// key. No attribute carries the identity, the request id or the fingerprint.
func (g *Engine) decideTraced(ctx context.Context, t trace.Tracer, front string, r *Rule, c Check) Outcome {
	ctx, span := t.Start(ctx, tracing.SpanDecide)
	start := time.Now()
	o := g.decide(ctx, r, c)
	end := time.Now()
	g.Metrics.decided(front, &o, end.Sub(start))
	if span.IsRecording() {
		traceOutcome(ctx, t, span, front, &o, c.Cost, start, end)
	}
	span.End()
	return o
}

// traceOutcome records o on its decide span, and the Redis call's span when Redis answered.
func traceOutcome(ctx context.Context, t trace.Tracer, span trace.Span, front string, o *Outcome, cost int64, start, end time.Time) {
	d := &o.Decision
	source := string(d.Source)
	if o.Skipped || o.Rejected {
		source = "none"
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, tracing.AttrFront.String(front), tracing.AttrPolicy.String(o.Rule.Name()),
		tracing.AttrResult.String(o.Result()), tracing.AttrSource.String(source))
	if !o.Skipped && !o.Rejected {
		attrs = append(attrs, tracing.AttrCost.Int64(cost))
	}
	if d.LimitName != "" {
		attrs = append(attrs, tracing.AttrLimit.String(d.LimitName), tracing.AttrRemaining.Int64(d.Remaining))
	}
	if !d.Allowed && d.RetryAfter != 0 {
		attrs = append(attrs, tracing.AttrRetryAfterMs.Int64(max(d.RetryAfter.Milliseconds(), -1)))
	}
	if d.Replayed {
		attrs = append(attrs, tracing.AttrReplayed.Bool(true))
	}
	if d.Err != nil {
		attrs = append(attrs, tracing.AttrErrorType.String(errorType(d.Err)))
		// the error's text may name addresses or script internals: the type says enough
		span.SetStatus(codes.Error, "redis did not decide: the failure mode did")
	}
	span.SetAttributes(attrs...)
	if d.Source == limiter.SourceRedis {
		_, rs := t.Start(ctx, tracing.SpanRedis, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
			trace.WithAttributes(tracing.AttrDBSystem.String("redis"), tracing.AttrDBSystemName.String("redis"),
				tracing.AttrDBOperation.String(tracing.SpanRedis)))
		rs.End(trace.WithTimestamp(end))
	}
}

// errorType names the kind of a Redis error for error.type: the limiter's ErrorKind, or
// circuit_open.
func errorType(err error) string {
	if errors.Is(err, limiter.ErrCircuitOpen) {
		return "circuit_open"
	}
	if errors.Is(err, ErrNoRedisYet) {
		return "no_redis_yet"
	}
	return limiter.KindOf(err).String()
}
