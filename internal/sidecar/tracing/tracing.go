// Package tracing is the sidecar's OpenTelemetry tracing: the span model every front and
// the engine share, W3C trace context (traceparent, tracestate) in and out, and the SDK
// set up from the standard OTEL_* environment variables (Setup).
//
// # Spans
//
//	ratelimit.<front>   server span of one request at a front (ratelimit.proxy,
//	                    ratelimit.envoy, ratelimit.check, ...), child of the caller's
//	                    traceparent when it sent one (StartHTTP, StartGRPC)
//	└ ratelimit.decide  one policy's decision (package engine): ratelimit.policy,
//	  │                 ratelimit.result, ratelimit.source, ratelimit.limit, ...
//	  └ EVALSHA         client span of the script call, when Redis answered it:
//	                    db.system=redis, db.operation.name=EVALSHA; never a key
//
// No span carries an identity, a header, a request id, a path or a Redis key: identities
// are often credentials, and keys contain them.
//
// # Cost when off
//
// Tracing is off unless Setup (or Use) turned it on. Off, Tracer is nil and every helper
// here returns at once: the hot path pays one atomic load per front request and per
// decision, and allocates nothing.
package tracing

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/metadata"
)

// ScopeName is the instrumentation scope of the sidecar's spans.
const ScopeName = "github.com/ratelimit-dev/ratelimit-operator/internal/sidecar"

// Span names.
const (
	// SpanFrontPrefix prefixes a front's name in its server span's name: "ratelimit.proxy".
	SpanFrontPrefix = "ratelimit."
	// SpanDecide is the span of one policy's decision.
	SpanDecide = "ratelimit.decide"
	// SpanRedis is the client span of the limiter's script call, named after the command.
	SpanRedis = "EVALSHA"
)

// Attribute keys of the sidecar's spans.
const (
	// AttrFront names the front (proxy, envoy, check, ...), on front and decide spans.
	AttrFront = attribute.Key("ratelimit.front")
	// AttrPolicy names the policy decided.
	AttrPolicy = attribute.Key("ratelimit.policy")
	// AttrResult is the outcome: allowed, denied, shadow_denied, skipped or rejected on a
	// decide span; allowed, denied or error on a front span.
	AttrResult = attribute.Key("ratelimit.result")
	// AttrSource says who decided: Redis, DenyCache, FailOpen, FailClosed, LocalCap, or none
	// (skipped or rejected before the limiter).
	AttrSource = attribute.Key("ratelimit.source")
	// AttrLimit names the reported limit: the denying one, else the tightest. Absent when
	// Redis was not asked.
	AttrLimit = attribute.Key("ratelimit.limit")
	// AttrCost is the request's weight.
	AttrCost = attribute.Key("ratelimit.cost")
	// AttrRemaining is what is left of the reported limit.
	AttrRemaining = attribute.Key("ratelimit.remaining")
	// AttrRetryAfterMs is how long a denied caller should wait (-1: never).
	AttrRetryAfterMs = attribute.Key("ratelimit.retry_after_ms")
	// AttrReplayed is true when an idempotency key replayed a first decision.
	AttrReplayed = attribute.Key("ratelimit.replayed")
	// AttrPolicies is how many policies a front request was decided against.
	AttrPolicies = attribute.Key("ratelimit.policies")
	// AttrErrorType classifies the Redis error behind a decision made without Redis: node,
	// topology, call, local or circuit_open (never the error's text).
	AttrErrorType = attribute.Key("error.type")
	// AttrDBSystem and AttrDBSystemName are "redis" on the script call's span (the older
	// and the current semantic conventions).
	AttrDBSystem     = attribute.Key("db.system")
	AttrDBSystemName = attribute.Key("db.system.name")
	// AttrDBOperation is the Redis command of the script call.
	AttrDBOperation = attribute.Key("db.operation.name")
	// AttrHTTPMethod and AttrHTTPStatus are an HTTP front's request method and answer.
	AttrHTTPMethod = attribute.Key("http.request.method")
	AttrHTTPStatus = attribute.Key("http.response.status_code")
)

// state is what is in force while tracing is on.
type state struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// current is nil while tracing is off.
var current atomic.Pointer[state]

// Tracer is the sidecar's tracer while tracing is on, nil while it is off: callers check it
// before building anything for a span.
func Tracer() trace.Tracer {
	if s := current.Load(); s != nil {
		return s.tracer
	}
	return nil
}

// Enabled reports whether tracing is on.
func Enabled() bool { return current.Load() != nil }

// Use turns tracing on with tp (nil turns it off) and W3C trace context propagation, and
// returns what restores the previous state. Setup calls it; tests and benchmarks call it
// with an in-memory provider. Not for use while requests are being served.
func Use(tp trace.TracerProvider) (restore func()) {
	var next *state
	if tp != nil {
		next = &state{tracer: tp.Tracer(ScopeName), prop: propagation.TraceContext{}}
	}
	prev := current.Swap(next)
	return func() { current.Store(prev) }
}

// noopSpan is the span of every helper while tracing is off (an empty struct: returning it
// allocates nothing).
var noopSpan trace.Span = noop.Span{}

// StartHTTP starts the server span of one request at an HTTP front named front, the child
// of the trace context h carries (traceparent, tracestate), and returns the context that
// carries it: the one call a front makes (then defer span.End()).
func StartHTTP(ctx context.Context, front string, method string, h http.Header) (context.Context, trace.Span) {
	s := current.Load()
	if s == nil {
		return ctx, noopSpan
	}
	ctx = s.prop.Extract(ctx, propagation.HeaderCarrier(h))
	return s.tracer.Start(ctx, SpanFrontPrefix+front, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(AttrFront.String(front), AttrHTTPMethod.String(method)))
}

// StartGRPC starts the server span of one call at a gRPC front named front, the child of
// the trace context of the call's metadata (traceparent, tracestate), and returns the
// context that carries it.
func StartGRPC(ctx context.Context, front string) (context.Context, trace.Span) {
	s := current.Load()
	if s == nil {
		return ctx, noopSpan
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = s.prop.Extract(ctx, metadataCarrier(md))
	}
	return s.tracer.Start(ctx, SpanFrontPrefix+front, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(AttrFront.String(front)))
}

// Inject writes the trace context of ctx's span into h as traceparent and tracestate,
// replacing any the caller sent: the reverse proxy's upstream sees the proxy's span as its
// parent. Off, h is left alone (and the caller's traceparent passes through unchanged).
func Inject(ctx context.Context, h http.Header) {
	if s := current.Load(); s != nil {
		s.prop.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Results of a front request (AttrResult on a front span).
const (
	// ResultAllowed: no policy denied the request.
	ResultAllowed = "allowed"
	// ResultDenied: a policy denied it.
	ResultDenied = "denied"
	// ResultError: the request could not be judged (malformed, no snapshot yet).
	ResultError = "error"
)

// EndFront records a front request's answer on its span: allowed (nothing denied), denied,
// or error (the request could not be judged); policies is how many policies were decided.
// It does not end the span.
func EndFront(span trace.Span, result string, policies int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrResult.String(result), AttrPolicies.Int(policies))
}

// SetHTTPStatus records an HTTP front's status code on its span.
func SetHTTPStatus(span trace.Span, code int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrHTTPStatus.Int(code))
	if code >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(code))
	}
}

// metadataCarrier reads gRPC metadata as a TextMapCarrier (keys are lowercase there, as
// traceparent and tracestate are).
type metadataCarrier metadata.MD

func (m metadataCarrier) Get(key string) string {
	if v := metadata.MD(m).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (m metadataCarrier) Set(key, value string) { metadata.MD(m).Set(key, value) }

func (m metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
