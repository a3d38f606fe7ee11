package forwardauth_test

import (
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestForwardAuthTracing: an auth request carrying the client's traceparent (Caddy and nginx
// pass the original headers on) gets a ratelimit.forwardauth span in that trace with the
// status it answered, and a decide span under it; no span carries the identity or the path.
func TestForwardAuthTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	t.Cleanup(tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))))
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	url := front(t, rig.Engine, loopback) + "/v1/forward-auth"
	const traceID, identity = "5bf92f3577b34da6a3ce929d0e0e4736", "alice-secret-key"
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		resp, _ := ask(t, http.MethodGet, url, caddy("/api/orders/secret-path", "X-API-Key", identity,
			"Traceparent", "00-"+traceID+"-10f067aa0ba902b7-01")...)
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	fronts, byParent := sidecartest.Spans(t, exp.GetSpans(), "ratelimit.forwardauth", identity, "secret-path")
	if len(fronts) != 2 {
		t.Fatalf("%d ratelimit.forwardauth spans, want 2", len(fronts))
	}
	for i, want := range []string{"200", "429"} {
		f := fronts[i]
		if f.SpanContext.TraceID().String() != traceID {
			t.Errorf("request %d: trace %s, want %s", i, f.SpanContext.TraceID(), traceID)
		}
		if status := sidecartest.Attr(f, tracing.AttrHTTPStatus); status != want {
			t.Errorf("request %d: span status %s, want %s", i, status, want)
		}
		if decide := byParent[f.SpanContext.SpanID()]; len(decide) != 1 || decide[0].Name != tracing.SpanDecide {
			t.Errorf("request %d: children of the front span %v", i, decide)
		}
	}
}
