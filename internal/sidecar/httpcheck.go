package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// CheckPath is where the HTTP JSON check API is served.
const CheckPath = "/v1/check"

// maxCheckBody bounds a check request body.
const maxCheckBody = 64 << 10

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	// Policy names a policy of the sidecar's namespace.
	Policy string `json:"policy"`
	// Identity is the caller's identity; empty means none (the policy's onMissing applies).
	Identity string `json:"identity,omitempty"`
	// Cost is the weight; 0 means the policy's default.
	Cost int64 `json:"cost,omitempty"`
	// RequestID makes the check idempotent when the policy has idempotency.
	RequestID string `json:"requestId,omitempty"`
	// Fingerprint describes the request RequestID stands for, for example its method and
	// path: a seen request id replays its first decision only for the same policy,
	// identity, cost and fingerprint, and counts as a new request otherwise.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// CheckResponse is the answer: HTTP 200 when allowed, 429 when denied.
type CheckResponse struct {
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
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	// Error says what was wrong, naming the field.
	Error string `json:"error"`
}

// CheckHandler serves POST /v1/check.
type CheckHandler struct {
	// Engine decides.
	Engine *Engine
}

// ServeHTTP answers one check.
func (h *CheckHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	req, status, err := readCheckRequest(r.Body)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	set := h.Engine.Store.Current()
	if set == nil {
		writeError(w, http.StatusServiceUnavailable, "no policy snapshot loaded yet")
		return
	}
	e := set.Policy(req.Policy)
	if e == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("policy: no policy %q in namespace %q", req.Policy, set.Namespace))
		return
	}
	cost, err := e.StatedCost(req.Cost)
	if err != nil {
		writeError(w, http.StatusBadRequest, "cost: "+err.Error())
		return
	}
	o := h.Engine.Decide(r.Context(), FrontCheck, e, Check{Identity: req.Identity, HasIdentity: req.Identity != "",
		Cost: cost, RequestID: req.RequestID, Fingerprint: req.Fingerprint})
	outs := []Outcome{o}
	SetHeaders(w.Header(), RateLimitHeaders(outs))
	status = http.StatusOK
	if !o.Allowed {
		status = http.StatusTooManyRequests
	}
	writeJSON(w, status, checkResponse(&o, set.Version))
}

// readCheckRequest decodes a body: JSON, one object, known fields only, a policy named.
func readCheckRequest(body io.Reader) (CheckRequest, int, error) {
	var req CheckRequest
	data, err := io.ReadAll(io.LimitReader(body, maxCheckBody+1))
	if err != nil {
		return req, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if len(data) > maxCheckBody {
		return req, http.StatusRequestEntityTooLarge, fmt.Errorf("body is larger than %d bytes", maxCheckBody)
	}
	if err := DecodeCheckRequest(data, &req); err != nil {
		return req, http.StatusBadRequest, err
	}
	return req, 0, nil
}

// DecodeCheckRequest decodes and checks a check request body.
func DecodeCheckRequest(data []byte, req *CheckRequest) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return fmt.Errorf("body is not a check request: %w", err)
	}
	if dec.More() {
		return errors.New("body has data after the JSON object")
	}
	if req.Policy == "" {
		return errors.New("policy: required")
	}
	if req.Cost < 0 {
		return fmt.Errorf("cost: %d is negative", req.Cost)
	}
	return nil
}

func checkResponse(o *Outcome, version string) CheckResponse {
	d := &o.Decision
	resp := CheckResponse{Policy: o.Entry.Name(), Allowed: o.Allowed, Result: o.Result(), Limit: d.LimitName,
		Quota: d.Limit, Remaining: d.Remaining, RetryAfterMs: d.RetryAfter.Milliseconds(),
		ResetAfterMs: d.ResetAfter.Milliseconds(), Replayed: d.Replayed, Source: string(d.Source), SnapshotVersion: version}
	if d.RetryAfter < 0 {
		resp.RetryAfterMs = -1
	}
	return resp
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}
