package extauthz_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestCheckTracing: a Check whose gRPC metadata carries a traceparent (as Envoy sends it
// when it traces) gets a ratelimit.extauthz server span in that trace with its result, and
// under it a decide span and an EVALSHA span; no span carries the identity or a header value.
func TestCheckTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	t.Cleanup(tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))))
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	const traceID, parentID, identity = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7", "alice-secret-key"
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+traceID+"-"+parentID+"-01")
	for i, want := range []int{200, 429} {
		resp, err := h.authz.Check(ctx, request{path: "/api/orders?page=2", header: []string{"X-API-Key", identity}}.proto(t))
		if err != nil {
			t.Fatalf("Check %d: %v", i, err)
		}
		if got := read(t, resp).status; got != want {
			t.Fatalf("Check %d: %d, want %d", i, got, want)
		}
	}
	fronts, byParent := sidecartest.Spans(t, exp.GetSpans(), "ratelimit.extauthz", identity, "page=2")
	if len(fronts) != 2 {
		t.Fatalf("%d ratelimit.extauthz spans, want 2", len(fronts))
	}
	for i, want := range []string{tracing.ResultAllowed, tracing.ResultDenied} {
		f := fronts[i]
		if f.SpanKind != trace.SpanKindServer || f.SpanContext.TraceID().String() != traceID || f.Parent.SpanID().String() != parentID {
			t.Errorf("check %d: front span kind %v trace %s parent %s", i, f.SpanKind, f.SpanContext.TraceID(), f.Parent.SpanID())
		}
		if result := sidecartest.Attr(f, tracing.AttrResult); result != want {
			t.Errorf("check %d: front result %q, want %q", i, result, want)
		}
		decide := byParent[f.SpanContext.SpanID()]
		if len(decide) != 1 || decide[0].Name != tracing.SpanDecide {
			t.Fatalf("check %d: children of the front span %v", i, decide)
		}
		if redis := byParent[decide[0].SpanContext.SpanID()]; len(redis) != 1 || redis[0].Name != tracing.SpanRedis {
			t.Errorf("check %d: children of the decide span %v", i, redis)
		}
	}
}
