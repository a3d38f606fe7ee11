package extauthz_test

import (
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestCheckTracing: a Check whose gRPC metadata carries a traceparent (as Envoy sends it
// when it traces) gets a ratelimit.extauthz server span in that trace with its result, and
// under it a decide span and an EVALSHA span; no span carries the identity or a header value.
func TestCheckTracing(t *testing.T) {
	exp := sidecartest.Tracing(t)
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
	sidecartest.CheckTracedCalls(t, exp.GetSpans(), sidecartest.TracedCalls{Front: "ratelimit.extauthz",
		TraceID: traceID, ParentID: parentID, Attr: tracing.AttrResult,
		Want: []string{tracing.ResultAllowed, tracing.ResultDenied}, Secrets: []string{identity, "page=2"}})
}
