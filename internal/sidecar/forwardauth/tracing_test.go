package forwardauth_test

import (
	"net/http"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestForwardAuthTracing: an auth request carrying the client's traceparent (Caddy and nginx
// pass the original headers on) gets a ratelimit.forwardauth server span in that trace with
// the status it answered, and under it a decide span and an EVALSHA span; no span carries
// the identity or the path.
func TestForwardAuthTracing(t *testing.T) {
	exp := sidecartest.Tracing(t)
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	url := front(t, rig.Engine, loopback) + "/v1/forward-auth"
	const traceID, parentID, identity = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7", "alice-secret-key"
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		resp, _ := sidecartest.Send(t, http.MethodGet, url, caddy("/api/orders/secret-path", "X-API-Key", identity,
			"Traceparent", "00-"+traceID+"-"+parentID+"-01")...)
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	sidecartest.CheckTracedCalls(t, exp.GetSpans(), sidecartest.TracedCalls{Front: "ratelimit.forwardauth",
		TraceID: traceID, ParentID: parentID, Attr: tracing.AttrHTTPStatus, Want: []string{"200", "429"},
		Secrets: []string{identity, "secret-path"}})
}
