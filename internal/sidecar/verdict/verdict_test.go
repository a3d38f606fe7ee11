package verdict_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestVerdicts: each way a front request ends is one verdict of its kind and status, and
// its result and policy count on the front's span.
func TestVerdicts(t *testing.T) {
	exp := sidecartest.Tracing(t)
	e := denyingEngine(t)
	rule := e.Store.Current().Rule("api")
	f := &verdict.Front{Name: "test", Engine: e, Log: logr.Discard()}
	forbid := &verdict.Front{Name: "test", Engine: e, Log: logr.Discard(), DenyStatus: http.StatusForbidden}
	cases := []struct {
		name     string
		judge    func(trace.Span) verdict.Verdict
		kind     verdict.Kind
		status   int
		result   string
		policies int
	}{
		{"no snapshot", func(s trace.Span) verdict.Verdict { return f.Refuse(s, engine.ErrNoSnapshot) },
			verdict.Unavailable, http.StatusServiceUnavailable, tracing.ResultError, 0},
		{"bad request", func(s trace.Span) verdict.Verdict { return f.Refuse(s, errors.New("path: refused")) },
			verdict.BadRequest, http.StatusBadRequest, tracing.ResultError, 0},
		{"rejected", func(s trace.Span) verdict.Verdict { return f.Reject(s, http.StatusNotFound, "policy: none") },
			verdict.BadRequest, http.StatusNotFound, tracing.ResultError, 0},
		{"no policy", func(s trace.Span) verdict.Verdict { return f.Decided(s, nil) },
			verdict.Admitted, http.StatusOK, tracing.ResultAllowed, 0},
		{"denied", func(s trace.Span) verdict.Verdict { return f.One(t.Context(), s, rule, engine.Check{Cost: 1}) },
			verdict.Denied, http.StatusTooManyRequests, tracing.ResultDenied, 1},
		{"denied 403", func(s trace.Span) verdict.Verdict { return forbid.One(t.Context(), s, rule, engine.Check{Cost: 1}) },
			verdict.Denied, http.StatusForbidden, tracing.ResultDenied, 1},
	}
	for _, c := range cases {
		exp.Reset()
		_, s := tracing.StartGRPC(t.Context(), "test")
		v := c.judge(s)
		s.End()
		if v.Kind != c.kind || v.Status != c.status || (v.Kind != verdict.Admitted) == (v.Message == "") {
			t.Errorf("%s: %v %d %q, want %v %d with a message", c.name, v.Kind, v.Status, v.Message, c.kind, c.status)
		}
		spans := exp.GetSpans()
		if len(spans) == 0 {
			t.Fatalf("%s: no span", c.name)
		}
		front := spans[len(spans)-1]
		if r, n := sidecartest.Attr(front, tracing.AttrResult), sidecartest.Attr(front, tracing.AttrPolicies); r != c.result || n != strconv.Itoa(c.policies) {
			t.Errorf("%s: span result %q policies %s, want %q %d", c.name, r, n, c.result, c.policies)
		}
	}
}
