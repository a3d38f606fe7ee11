// Package httpcheck is the sidecar's HTTP JSON check API: POST /v1/check names a policy and
// states the caller's identity, cost and request id (and, for a policy with tiers, the
// tier or the request that chooses it); the answer is the engine's decision, 200 when
// allowed and 429 when denied, with the RateLimit headers. With "peek": true it is what
// the check would decide now, debiting nothing, with every limit's usage. POST /v1/plan
// takes the same body and answers which tier and limits apply, debiting nothing. Errors are
// a jsonreply.ErrorBody naming the field at fault.
//
// The check's body and answer, and their conversion to and from the engine, are package
// checkwire's (Request, CheckOf, Response, ResponseOf): the manager's usage API answers a
// usage read with them too, without linking this front.
package httpcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
)

// FrontName names the check API in metrics and logs.
const FrontName = "check"

// Path is where the check API is served.
const Path = "/v1/check"

// maxCheckBody bounds a check request body.
const maxCheckBody = 64 << 10

// Handler serves POST /v1/check.
type Handler struct {
	// Engine decides.
	Engine *engine.Engine
	// Log receives denials at V(1). Identities are never logged.
	Log logr.Logger
}

// NewServer is the check API's server over e, served at Path, with the listener limits; it
// logs denials to log.
func NewServer(e *engine.Engine, limits httpserver.Limits, log logr.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(Path, &Handler{Engine: e, Log: log})
	mux.Handle(PlanPath, &PlanHandler{Engine: e})
	mux.Handle(SettlePath, &SettleHandler{Engine: e})
	mux.Handle(ReleasePath, &ReleaseHandler{Engine: e})
	return httpserver.New(mux, limits)
}

// ServeHTTP answers one check. While tracing is on, its span is the child of the request's
// traceparent.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, span := tracing.StartHTTP(r.Context(), FrontName, r.Method, r.Header)
	defer span.End()
	v, version := h.judge(ctx, span, r)
	tracing.SetHTTPStatus(span, v.Status)
	switch v.Kind {
	case verdict.Admitted, verdict.Denied:
		ratelimitheaders.Set(w.Header(), v.Fields)
		jsonreply.Write(w, v.Status, checkwire.ResponseOf(&v.Outcomes[0], version))
	default:
		if v.Status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", http.MethodPost)
		}
		jsonreply.Error(w, v.Status, v.Message)
	}
}

// judge is the verdict on the check r asks for, and the version of the snapshot it was
// decided on.
func (h *Handler) judge(ctx context.Context, span trace.Span, r *http.Request) (verdict.Verdict, string) {
	f := verdict.Front{Name: FrontName, Engine: h.Engine, Log: h.Log}
	if r.Method != http.MethodPost {
		return f.Reject(span, http.StatusMethodNotAllowed, "use POST"), ""
	}
	req, status, err := readRequest(r.Body)
	if err != nil {
		return f.Reject(span, status, err.Error()), ""
	}
	set, err := h.Engine.Snapshot()
	if err != nil {
		return f.Refuse(span, err), ""
	}
	rule, c, status, err := checkwire.CheckOf(set, &req)
	if err != nil {
		return f.Reject(span, status, err.Error()), ""
	}
	c.Settles = true // its caller settles with POST /v1/settle, naming the answer's reservation
	return f.One(ctx, span, rule, c), set.Version
}

// readRequest decodes a body: JSON, one object, known fields only, a policy named.
func readRequest(body io.Reader) (checkwire.Request, int, error) {
	var req checkwire.Request
	data, status, err := readBody(body)
	if err != nil {
		return req, status, err
	}
	if err := Decode(data, &req); err != nil {
		return req, http.StatusBadRequest, err
	}
	return req, 0, nil
}

// Decode decodes and checks a check request body.
func Decode(data []byte, req *checkwire.Request) error {
	if err := decodeStrict(data, req, "a check request"); err != nil {
		return err
	}
	if req.Policy == "" {
		return errors.New("policy: required")
	}
	if req.Cost < 0 {
		return fmt.Errorf("cost: %d is negative", req.Cost)
	}
	if req.Peek && req.RequestID != "" {
		return errors.New("requestId: a peek records nothing, so it takes no request id")
	}
	if req.Tier != "" && req.Request != nil {
		return errors.New("tier: set tier or request, not both: request chooses the tier by the policy's conditions")
	}
	return nil
}
