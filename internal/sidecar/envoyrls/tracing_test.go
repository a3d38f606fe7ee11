package envoyrls_test

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestEnvoyTracing: a call whose gRPC metadata carries a traceparent (as Envoy sends it when
// it traces) gets a ratelimit.envoy server span in that trace, a decide span per policy and
// an EVALSHA span; the descriptor values (the identity among them) appear in no span.
func TestEnvoyTracing(t *testing.T) {
	exp := sidecartest.Tracing(t)
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
	sidecartest.CheckTracedCalls(t, exp.GetSpans(), sidecartest.TracedCalls{Front: "ratelimit.envoy",
		TraceID: traceID, ParentID: parentID, Attr: tracing.AttrResult, Want: []string{"allowed", "denied"},
		Secrets: []string{identity}})
}
