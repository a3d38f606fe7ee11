package envoyrls_test

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestEnvoyTracing: a call whose gRPC metadata carries a traceparent (as Envoy sends it when
// it traces) gets a ratelimit.envoy server span in that trace, a decide span per policy and
// an EVALSHA span; the descriptor values (the identity among them) appear in no span.
func TestEnvoyTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(tracing.Use(tp))
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("rls", "/orders", 1, time.Minute))
	const traceID, parentID, identity = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7", "bob-secret-user-id"
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+traceID+"-"+parentID+"-01")
	for i, want := range []rlsv3.RateLimitResponse_Code{codeOK, overLimit} {
		resp, err := h.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: envoyDomain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{envoyDesc("route", "/orders", "user", identity)}})
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("call %d: %v %v, want %v", i, resp.GetOverallCode(), err, want)
		}
	}
	front, byParent := sidecartest.Spans(t, exp.GetSpans(), "ratelimit.envoy", identity)
	if len(front) != 2 {
		t.Fatalf("%d ratelimit.envoy spans, want 2", len(front))
	}
	for i, want := range []string{"allowed", "denied"} {
		f := front[i]
		if f.SpanKind != trace.SpanKindServer || f.SpanContext.TraceID().String() != traceID || f.Parent.SpanID().String() != parentID {
			t.Errorf("call %d: front span kind %v trace %s parent %s", i, f.SpanKind, f.SpanContext.TraceID(), f.Parent.SpanID())
		}
		if got := sidecartest.Attr(f, tracing.AttrResult); got != want {
			t.Errorf("call %d: front result %s, want %s", i, got, want)
		}
		decide := byParent[f.SpanContext.SpanID()]
		if len(decide) != 1 || decide[0].Name != tracing.SpanDecide {
			t.Fatalf("call %d: children of the front span %v", i, decide)
		}
		if redis := byParent[decide[0].SpanContext.SpanID()]; len(redis) != 1 || redis[0].Name != tracing.SpanRedis {
			t.Errorf("call %d: children of the decide span %v", i, redis)
		}
	}
}
