// Package httpcheck is the sidecar's HTTP JSON check API: POST /v1/check names a policy and
// states the caller's identity, cost and request id (and, for a policy with tiers, the
// tier or the request that chooses it); the answer is the engine's decision, 200 when
// allowed and 429 when denied, with the RateLimit headers. With "peek": true it is what
// the check would decide now, debiting nothing, with every limit's usage. POST /v1/plan
// takes the same
// body and answers which tier and limits apply, debiting nothing. Errors are a
// jsonreply.ErrorBody naming the field at fault.
package httpcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// FrontName names the check API in metrics and logs.
const FrontName = "check"

// Path is where the check API is served.
const Path = "/v1/check"

// maxCheckBody bounds a check request body.
const maxCheckBody = 64 << 10

// Request is the body of POST /v1/check.
type Request struct {
	// Policy names a policy of the sidecar's namespace.
	Policy string `json:"policy"`
	// Identity is the caller's identity; empty means none (the policy's onMissing applies).
	// A policy with a composite identity takes Parts instead.
	Identity string `json:"identity,omitempty"`
	// Parts are the values of a composite identity's parts, one per part in the policy's
	// order, each as the part yields it (a part of several sources: the source's position,
	// "=" and the value, as "1=10.0.0.0"); an empty value is a missing part (the policy's
	// onMissing applies). The same values on every front spend the same counters.
	Parts []string `json:"parts,omitempty"`
	// Cost is the weight; 0 means the policy's default.
	Cost int64 `json:"cost,omitempty"`
	// RequestID makes the check idempotent when the policy has idempotency.
	RequestID string `json:"requestId,omitempty"`
	// Fingerprint describes the request RequestID stands for, for example its method and
	// path: a seen request id replays its first decision only for the same policy,
	// identity, cost and fingerprint, and counts as a new request otherwise.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Tier names the tier whose limits apply, for a caller that knows its plan; empty
	// lets Request choose it by the policy's conditions, or the default tier without one.
	Tier string `json:"tier,omitempty"`
	// Request describes the request being limited, for the policy's tier conditions.
	Request *Attributes `json:"request,omitempty"`
	// Peek asks what a check of this request would decide now, debiting nothing: no count,
	// no lease, no request id recorded (a peek takes none: RequestID must be empty). The
	// answer carries every limit's usage (Response.Limits).
	Peek bool `json:"peek,omitempty"`
}

// Attributes are what a tier condition can read of the request being limited.
type Attributes struct {
	// Method is the request method.
	Method string `json:"method,omitempty"`
	// Host is the request's host.
	Host string `json:"host,omitempty"`
	// Path is the request's path.
	Path string `json:"path,omitempty"`
	// Headers are the request's headers, one value each.
	Headers map[string]string `json:"headers,omitempty"`
}

// Response is the answer: HTTP 200 when allowed, 429 when denied.
type Response struct {
	// Policy is the policy checked.
	Policy string `json:"policy"`
	// Allowed is the final answer (shadow policies always allow).
	Allowed bool `json:"allowed"`
	// Result is allowed, denied, shadow_denied, skipped or rejected.
	Result string `json:"result"`
	// Limit names the reported limit: the tightest, or the denying one.
	Limit string `json:"limit,omitempty"`
	// Quota is that limit's size.
	Quota int64 `json:"quota"`
	// Remaining is what is left of it.
	Remaining int64 `json:"remaining"`
	// RetryAfterMs is how long to wait when denied; -1 means never.
	RetryAfterMs int64 `json:"retryAfterMs"`
	// ResetAfterMs is when the limit is full again.
	ResetAfterMs int64 `json:"resetAfterMs"`
	// Replayed is true when the request id had been seen: the first decision, no debit.
	Replayed bool `json:"replayed,omitempty"`
	// Source says who decided: Redis, DenyCache, FailOpen, FailClosed or LocalCap.
	Source string `json:"source,omitempty"`
	// SnapshotVersion is the snapshot the decision was made on.
	SnapshotVersion string `json:"snapshotVersion"`
	// Tier is the tier whose limits were checked.
	Tier string `json:"tier,omitempty"`
	// Peek is true for the answer to a peek: nothing was debited, and Remaining is what the
	// reported limit holds before the request.
	Peek bool `json:"peek,omitempty"`
	// Limits, for a peek Redis answered, is every limit of the tier: its quota, what the
	// identity has used and has left, when it is full again, and how long this request
	// would wait on it.
	Limits []usage.Limit `json:"limits,omitempty"`
	// Reserved, for an admission whose policy settles its cost from the response
	// (cost.settle), is the cost reserved: settle it with POST /v1/settle once the response
	// states its cost, or it stands.
	Reserved int64 `json:"reserved,omitempty"`
	// Reservation, with Reserved, is the id the reservation is recorded under in Redis: the
	// settlement names it, with the check's caller. Absent when Redis could not record it
	// (the reservation then stands, unsettled).
	Reservation string `json:"reservation,omitempty"`
	// Slot, for an admission of a policy with a concurrency limit, is the slot the request
	// holds: give it back with POST /v1/release when the request ends, or it comes back
	// after the policy's concurrency.slotTTL.
	Slot string `json:"slot,omitempty"`
}

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
		jsonreply.Write(w, v.Status, ResponseOf(&v.Outcomes[0], version))
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
	rule, c, status, err := CheckOf(set, &req)
	if err != nil {
		return f.Reject(span, status, err.Error()), ""
	}
	c.Settles = true // its caller settles with POST /v1/settle, naming the answer's reservation
	return f.One(ctx, span, rule, c), set.Version
}

// CheckOf is the policy req names in set and the check it states, or the HTTP status and
// error refusing it (the field at fault named). The usage API states its reads with it too.
func CheckOf(set *engine.Set, req *Request) (*engine.Rule, engine.Check, int, error) {
	rule := set.Rule(req.Policy)
	if rule == nil {
		return nil, engine.Check{}, http.StatusNotFound, fmt.Errorf("policy: no policy %q in namespace %q", req.Policy, set.Namespace)
	}
	cost, err := requestread.StatedCost(&rule.Entry, req.Cost)
	if err != nil {
		return nil, engine.Check{}, http.StatusBadRequest, fmt.Errorf("cost: %w", err)
	}
	tier, err := tierOf(rule, req)
	if err != nil {
		return nil, engine.Check{}, http.StatusBadRequest, err
	}
	id, hasID := req.Identity, req.Identity != ""
	switch composite := len(rule.Entry.Identity.Parts) > 0; {
	case composite && req.Identity != "":
		return nil, engine.Check{}, http.StatusBadRequest, fmt.Errorf("identity: policy %q has a composite identity: state its parts", req.Policy)
	case composite || len(req.Parts) > 0:
		if id, hasID, err = requestread.StatedParts(&rule.Entry, req.Parts); err != nil {
			return nil, engine.Check{}, http.StatusBadRequest, fmt.Errorf("parts: %w", err)
		}
	}
	return rule, engine.Check{Identity: id, HasIdentity: hasID, Cost: cost,
		RequestID: req.RequestID, Fingerprint: req.Fingerprint, Tier: tier, Peek: req.Peek}, 0, nil
}

// readRequest decodes a body: JSON, one object, known fields only, a policy named.
func readRequest(body io.Reader) (Request, int, error) {
	var req Request
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
func Decode(data []byte, req *Request) error {
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

// ResponseOf is the answer to a check decided as o on the snapshot version.
func ResponseOf(o *engine.Outcome, version string) Response {
	d := &o.Decision
	resp := Response{Policy: o.Rule.Name(), Allowed: o.Allowed, Result: o.Result(), Limit: d.LimitName,
		Quota: d.Limit, Remaining: d.Remaining, RetryAfterMs: d.RetryAfter.Milliseconds(),
		ResetAfterMs: d.ResetAfter.Milliseconds(), Replayed: d.Replayed, Source: string(d.Source), SnapshotVersion: version,
		Tier: o.Tier.Name}
	if d.RetryAfter < 0 {
		resp.RetryAfterMs = -1
	}
	if o.Peeked {
		resp.Peek, resp.Limits = true, UsageOf(o.State)
	}
	if o.Settles() {
		resp.Reserved, resp.Reservation = o.Reserved(), o.Reservation()
	}
	resp.Slot = o.Slot()
	return resp
}

// UsageOf is the wire form of a peek's limit states, in the policy's order.
func UsageOf(states []limiter.LimitState) []usage.Limit {
	out := make([]usage.Limit, len(states))
	for i, s := range states {
		out[i] = usage.Limit{Name: s.Name, Quota: s.Limit, Used: s.Used(), Remaining: s.Remaining,
			ResetAfterMs: ceilMs(s.ResetAfter), RetryAfterMs: ceilMs(s.RetryAfter)}
	}
	return out
}

// ceilMs is d in whole ms, rounded up; negative (never) is -1.
func ceilMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
