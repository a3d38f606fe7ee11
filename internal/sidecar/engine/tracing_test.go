package engine_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// decideBench is one policy decision to repeat: on an engine without Redis ("local": the
// failure mode decides, all CPU, where any overhead shows most) or on a real redis-server.
type decideBench struct {
	e     *engine.Engine
	rule  *engine.Rule
	check engine.Check
}

func newDecideBench(tb testing.TB, redis bool) *decideBench {
	tb.Helper()
	policy := sidecartest.Policy("orders", 30_000_000) // never denies here
	var e *engine.Engine
	if redis {
		e = sidecartest.Start(tb, limiter.Options{}, policy).Engine
	} else {
		e = &engine.Engine{Store: sidecartest.Store(tb, policy), Metrics: engine.NewMetrics(prometheus.NewRegistry())}
	}
	return &decideBench{e: e, rule: e.Store.Current().Rule("orders"),
		check: engine.Check{Identity: "alice", HasIdentity: true, Cost: 1}}
}

// tracingOn turns tracing on for tb's duration, sampling every span, through the batching
// processor the sidecar runs, into an exporter that keeps nothing (a benchmark's spans
// would fill memory otherwise).
func tracingOn(tb testing.TB) {
	tb.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	restore := tracing.Use(tp)
	tb.Cleanup(func() {
		restore()
		_ = tp.Shutdown(context.Background())
	})
}

// discard is an in-memory exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func tracingOff(tb testing.TB) {
	tb.Helper()
	tb.Cleanup(tracing.Use(nil))
}

// TestDecideTracingOffAllocates: tracing off adds no allocation to a decision.
func TestDecideTracingOffAllocates(t *testing.T) {
	tracingOff(t)
	d := newDecideBench(t, false)
	ctx := context.Background()
	base := testing.AllocsPerRun(1000, func() { d.e.DecideUntraced(ctx, "bench", d.rule, d.check) })
	off := testing.AllocsPerRun(1000, func() { d.e.Decide(ctx, "bench", d.rule, d.check) })
	if off != base {
		t.Fatalf("tracing off: %v allocations per decision, baseline %v", off, base)
	}
}

func benchDecide(b *testing.B, redis bool, decide func(*engine.Engine, context.Context, string, *engine.Rule, engine.Check) engine.Outcome) {
	d := newDecideBench(b, redis)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if o := decide(d.e, ctx, "bench", d.rule, d.check); !o.Allowed {
			b.Fatal("denied")
		}
	}
}

func benchModes(b *testing.B, setup func(testing.TB), decide func(*engine.Engine, context.Context, string, *engine.Rule, engine.Check) engine.Outcome) {
	b.Run("local", func(b *testing.B) { setup(b); benchDecide(b, false, decide) })
	b.Run("redis", func(b *testing.B) { setup(b); benchDecide(b, true, decide) })
}

// BenchmarkDecideBaseline is a decision without any tracing code path.
func BenchmarkDecideBaseline(b *testing.B) {
	benchModes(b, tracingOff, (*engine.Engine).DecideUntraced)
}

// BenchmarkDecideTracingOff is Decide with tracing off, as the sidecar runs without OTEL_*.
func BenchmarkDecideTracingOff(b *testing.B) {
	benchModes(b, tracingOff, (*engine.Engine).Decide)
}

// BenchmarkDecideTracingOn is Decide with every span sampled into memory.
func BenchmarkDecideTracingOn(b *testing.B) {
	benchModes(b, tracingOn, (*engine.Engine).Decide)
}
