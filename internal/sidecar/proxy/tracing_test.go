package proxy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// The caller's trace context and what else it sends: none of it but the trace and parent
// ids may appear in a span.
const (
	callerTraceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID   = "00f067aa0ba902b7"
	callerParent   = "00-" + callerTraceID + "-" + callerSpanID + "-01"
	callerState    = "vendor=opaque-state-value"
	secretIdentity = "alice-secret-api-key"
	otherHeader    = "some-header-value-42"
	idempotencyKey = "req-id-77"
)

// tracedGet sends a request carrying the caller's trace context, identity and other headers.
func tracedGet(t *testing.T, p *proxyRig, path string) *http.Response {
	t.Helper()
	resp, _ := p.get(t, path, "traceparent", callerParent, "tracestate", callerState,
		"X-API-Key", secretIdentity, "X-Other", otherHeader, "Idempotency-Key", idempotencyKey)
	return resp
}

// requestSpans waits for the front span of the n-th traced request (in end order) and
// returns it with its decide and Redis spans.
type requestSpans struct {
	front  tracetest.SpanStub
	decide []tracetest.SpanStub
	redis  []tracetest.SpanStub
}

// collect groups the exported spans by front span, in the order the fronts ended; it waits
// until want front spans have ended.
func collect(t *testing.T, exp *tracetest.InMemoryExporter, want int) []requestSpans {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var stubs tracetest.SpanStubs
	for {
		stubs = exp.GetSpans()
		n := 0
		for _, s := range stubs {
			if s.Name == "ratelimit.proxy" {
				n++
			}
		}
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d front spans after 5s, want %d: %v", n, want, names(stubs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var out []requestSpans
	for _, f := range stubs {
		if f.Name != "ratelimit.proxy" {
			continue
		}
		r := requestSpans{front: f}
		for _, d := range stubs {
			if d.Name == tracing.SpanDecide && d.Parent.SpanID() == f.SpanContext.SpanID() {
				r.decide = append(r.decide, d)
				for _, c := range stubs {
					if c.Parent.SpanID() == d.SpanContext.SpanID() {
						r.redis = append(r.redis, c)
					}
				}
			}
		}
		out = append(out, r)
	}
	return out
}

func names(stubs tracetest.SpanStubs) []string {
	var n []string
	for _, s := range stubs {
		n = append(n, s.Name)
	}
	return n
}

// checkNoSecrets fails when any attribute of any span (or its resource, events, status)
// equals or contains the identity, a header value or the request id.
func checkNoSecrets(t *testing.T, stubs tracetest.SpanStubs) {
	t.Helper()
	secrets := []string{secretIdentity, otherHeader, idempotencyKey, callerState, callerParent}
	for _, s := range stubs {
		var values []string
		for _, kv := range s.Attributes {
			values = append(values, string(kv.Key)+"="+kv.Value.String())
		}
		for _, kv := range s.Resource.Attributes() {
			values = append(values, kv.Value.String())
		}
		for _, e := range s.Events {
			values = append(values, e.Name)
			for _, kv := range e.Attributes {
				values = append(values, kv.Value.String())
			}
		}
		values = append(values, s.Name, s.Status.Description)
		for _, v := range values {
			for _, secret := range secrets {
				if v == secret || strings.Contains(v, secret) {
					t.Errorf("span %s records %q, which holds %q", s.Name, v, secret)
				}
			}
		}
	}
}

// TestProxyTracing: through the proxy against real Redis, front → decide → EVALSHA spans
// continue the caller's trace with the right links and attributes, the upstream receives the
// proxy span's traceparent, a denial is result=denied (then DenyCache, without a Redis span),
// and no span records the identity or any header.
func TestProxyTracing(t *testing.T) {
	exp := sidecartest.Tracing(t)
	rig := sidecartest.Start(t, limiter.Options{DenyCacheSize: 100}, sidecartest.Policy("orders", 2))
	p := newProxyRig(t, rig)
	statuses := []int{200, 200, 429, 429}
	for i, want := range statuses {
		if resp := tracedGet(t, p, "/api/orders/1"); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	reqs := collect(t, exp, len(statuses))
	checkAdmitted(t, reqs[0])
	checkUpstreamParent(t, p, reqs[1])
	checkDenied(t, reqs[2], reqs[3])
	checkNoSecrets(t, exp.GetSpans())
}

// checkAdmitted checks an admitted request's spans: a server span continuing the caller's
// trace, one decide span and one EVALSHA span inside it.
func checkAdmitted(t *testing.T, first requestSpans) {
	t.Helper()
	f := first.front
	if f.SpanKind != trace.SpanKindServer || f.SpanContext.TraceID().String() != callerTraceID ||
		f.Parent.SpanID().String() != callerSpanID || !f.Parent.IsRemote() {
		t.Fatalf("front span %s kind %v trace %s parent %s: want a server span, child of the caller's %s",
			f.Name, f.SpanKind, f.SpanContext.TraceID(), f.Parent.SpanID(), callerParent)
	}
	if f.SpanContext.TraceState().String() != callerState {
		t.Errorf("tracestate %q, want the caller's %q", f.SpanContext.TraceState().String(), callerState)
	}
	if sidecartest.Attr(f, tracing.AttrResult) != "allowed" || sidecartest.Attr(f, tracing.AttrHTTPStatus) != "200" || sidecartest.Attr(f, tracing.AttrPolicies) != "1" {
		t.Errorf("front span attributes %v", f.Attributes)
	}
	if len(first.decide) != 1 || len(first.redis) != 1 {
		t.Fatalf("first request: %d decide spans and %d Redis spans, want 1 and 1", len(first.decide), len(first.redis))
	}
	checkDecideRedis(t, first.decide[0], first.redis[0])
}

// checkDecideRedis checks an admitted decision's span and its Redis span.
func checkDecideRedis(t *testing.T, d, r tracetest.SpanStub) {
	t.Helper()
	for k, want := range map[attribute.Key]string{tracing.AttrPolicy: "orders", tracing.AttrResult: "allowed",
		tracing.AttrSource: "Redis", tracing.AttrLimit: "per-minute", tracing.AttrFront: "proxy", tracing.AttrCost: "1"} {
		if got := sidecartest.Attr(d, k); got != want {
			t.Errorf("decide span %s = %q, want %q", k, got, want)
		}
	}
	if r.Name != "EVALSHA" || r.SpanKind != trace.SpanKindClient || sidecartest.Attr(r, "db.system") != "redis" ||
		r.SpanContext.TraceID().String() != callerTraceID {
		t.Errorf("Redis span %s kind %v attrs %v", r.Name, r.SpanKind, r.Attributes)
	}
	if r.StartTime.Before(d.StartTime) || r.EndTime.After(d.EndTime) {
		t.Errorf("Redis span [%v, %v] outside its decide span [%v, %v]", r.StartTime, r.EndTime, d.StartTime, d.EndTime)
	}
}

// checkUpstreamParent: the upstream saw the proxy span of req as its parent, in the
// caller's trace, with the caller's tracestate.
func checkUpstreamParent(t *testing.T, p *proxyRig, req requestSpans) {
	t.Helper()
	last := p.last.Load()
	up := last.Header.Get("traceparent")
	if want := "00-" + callerTraceID + "-" + req.front.SpanContext.SpanID().String() + "-01"; up != want {
		t.Errorf("upstream traceparent %q, want %q (the proxy span's)", up, want)
	}
	if got := last.Header.Get("tracestate"); got != callerState {
		t.Errorf("upstream tracestate %q, want %q", got, callerState)
	}
}

// checkDenied: Redis's denial is result=denied with its Redis span; the deny cache's
// answer has no Redis span.
func checkDenied(t *testing.T, denied, cached requestSpans) {
	t.Helper()
	if sidecartest.Attr(denied.front, tracing.AttrResult) != "denied" || sidecartest.Attr(denied.front, tracing.AttrHTTPStatus) != "429" {
		t.Errorf("denied front span %v", denied.front.Attributes)
	}
	if len(denied.decide) != 1 || sidecartest.Attr(denied.decide[0], tracing.AttrResult) != "denied" ||
		sidecartest.Attr(denied.decide[0], tracing.AttrSource) != "Redis" || sidecartest.Attr(denied.decide[0], tracing.AttrRetryAfterMs) == "" ||
		len(denied.redis) != 1 {
		t.Errorf("denial: decide %v, %d Redis spans", denied.decide, len(denied.redis))
	}
	if len(cached.decide) != 1 || sidecartest.Attr(cached.decide[0], tracing.AttrSource) != "DenyCache" ||
		sidecartest.Attr(cached.decide[0], tracing.AttrResult) != "denied" || len(cached.redis) != 0 {
		t.Errorf("deny cache: decide %v, %d Redis spans (Redis was not asked)", cached.decide, len(cached.redis))
	}
}

// TestProxyTracingWithoutRedis: with Redis gone, the failure mode decides: source FailOpen or
// FailClosed, an error status naming only the kind of error, and no Redis span.
func TestProxyTracingWithoutRedis(t *testing.T) {
	exp := sidecartest.Tracing(t)
	closed := func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP[0].PathPrefixes = []string{"/api/closed"}
		s.FailureMode = v1alpha1.FailureModeFailClosed
	}
	rig := sidecartest.Start(t, limiter.Options{Timeout: 200 * time.Millisecond},
		sidecartest.Policy("open", 5), sidecartest.Policy("closed", 5, closed))
	p := newProxyRig(t, rig)
	rig.Redis.Kill()
	if resp := tracedGet(t, p, "/api/open"); resp.StatusCode != 200 {
		t.Fatalf("FailOpen: %d", resp.StatusCode)
	}
	if resp := tracedGet(t, p, "/api/closed"); resp.StatusCode != 429 {
		t.Fatalf("FailClosed: %d", resp.StatusCode)
	}
	reqs := collect(t, exp, 2)
	for i, want := range []struct{ source, result string }{{"FailOpen", "allowed"}, {"FailClosed", "denied"}} {
		r := reqs[i]
		if len(r.decide) != 1 || len(r.redis) != 0 {
			t.Fatalf("%s: %d decide spans, %d Redis spans; want 1 and none", want.source, len(r.decide), len(r.redis))
		}
		d := r.decide[0]
		if sidecartest.Attr(d, tracing.AttrSource) != want.source || sidecartest.Attr(d, tracing.AttrResult) != want.result ||
			d.Status.Code != codes.Error || sidecartest.Attr(d, tracing.AttrErrorType) == "" {
			t.Errorf("%s: decide span %v status %v", want.source, d.Attributes, d.Status)
		}
	}
	checkNoSecrets(t, exp.GetSpans())
}

// TestProxyTracingOff: with tracing off the proxy neither records nor rewrites trace context:
// the upstream receives the caller's traceparent unchanged.
func TestProxyTracingOff(t *testing.T) {
	restore := tracing.Use(nil)
	t.Cleanup(restore)
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("orders", 2))
	p := newProxyRig(t, rig)
	if resp := tracedGet(t, p, "/api/orders/1"); resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	if got := p.last.Load().Header.Get("traceparent"); got != callerParent {
		t.Errorf("upstream traceparent %q, want the caller's %q passed through", got, callerParent)
	}
}
