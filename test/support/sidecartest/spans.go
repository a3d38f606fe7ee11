package sidecartest

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
)

// Tracing turns the sidecar's tracing on for the test's duration, every span ending in the
// returned in-memory exporter.
func Tracing(t testing.TB) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	restore := tracing.Use(tp)
	t.Cleanup(func() {
		restore()
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

// Spans are the spans named front among stubs, in the order they ended, and every span by
// its parent's span id. It fails the test when any attribute of any span contains one of
// secrets (identities, header values): no span may carry them.
func Spans(t testing.TB, stubs tracetest.SpanStubs, front string, secrets ...string) ([]tracetest.SpanStub, map[trace.SpanID][]tracetest.SpanStub) {
	t.Helper()
	var fronts []tracetest.SpanStub
	byParent := map[trace.SpanID][]tracetest.SpanStub{}
	for _, s := range stubs {
		if s.Name == front {
			fronts = append(fronts, s)
		}
		byParent[s.Parent.SpanID()] = append(byParent[s.Parent.SpanID()], s)
		for _, kv := range s.Attributes {
			for _, secret := range secrets {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s attribute %s holds %q", s.Name, kv.Key, secret)
				}
			}
		}
	}
	return fronts, byParent
}

// Attr is the value of span s's attribute key as text, or "" when s has none.
func Attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TracedCalls is what a test's traced calls through a front must have left: per call, in
// the order the calls ended, a server span of the front continuing the caller's trace, one
// decide span under it and one Redis span under that.
type TracedCalls struct {
	// Front is the name of the front's span, as "ratelimit.envoy".
	Front string
	// TraceID and ParentID are the caller's trace and span, the front spans' remote parent.
	TraceID, ParentID string
	// Attr is the front span's attribute that tells the calls apart; Want holds its value
	// for each call.
	Attr attribute.Key
	Want []string
	// Secrets are values (identities, header values, paths) no span attribute may hold.
	Secrets []string
}

// CheckTracedCalls fails the test when stubs are not the span trees c describes.
func CheckTracedCalls(t testing.TB, stubs tracetest.SpanStubs, c TracedCalls) {
	t.Helper()
	fronts, byParent := Spans(t, stubs, c.Front, c.Secrets...)
	if len(fronts) != len(c.Want) {
		t.Fatalf("%d %s spans, want %d", len(fronts), c.Front, len(c.Want))
	}
	for i, want := range c.Want {
		f := fronts[i]
		if f.SpanKind != trace.SpanKindServer || f.SpanContext.TraceID().String() != c.TraceID || f.Parent.SpanID().String() != c.ParentID {
			t.Errorf("call %d: front span kind %v trace %s parent %s", i, f.SpanKind, f.SpanContext.TraceID(), f.Parent.SpanID())
		}
		if got := Attr(f, c.Attr); got != want {
			t.Errorf("call %d: front span %s %q, want %q", i, c.Attr, got, want)
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
