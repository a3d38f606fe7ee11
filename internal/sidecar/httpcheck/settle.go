package httpcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
)

// SettlePath is where the check API settles a reservation.
const SettlePath = "/v1/settle"

// SettleRequest is the body of POST /v1/settle: the check that reserved (its policy,
// identity or parts, and tier or request, as the check stated them), the reservation its
// answer carried, and the cost the response stated.
type SettleRequest struct {
	// Caller is the check's caller, as the check named it.
	Caller
	// Reserved is the cost the check's answer reserved (Response.Reserved).
	Reserved int64 `json:"reserved"`
	// ReservedAtMs is the time the check's answer gave (Response.ReservedAtMs): a window
	// gives nothing back once the window the reservation was counted in has ended.
	ReservedAtMs int64 `json:"reservedAtMs"`
	// Cost is the cost the response stated, 0 or more. Required.
	Cost *int64 `json:"cost"`
	// RequestID identifies the settlement: retried under it (for 10 minutes) it applies
	// once. Required; the request's own id is a good one.
	RequestID string `json:"requestId"`
}

// SettleResponse is the answer to a settlement.
type SettleResponse struct {
	// Policy is the policy settled.
	Policy string `json:"policy"`
	// Result is charged (cost above the reservation: the rest debited, even past the
	// limit), unreserved (below: the difference given back), or exact (nothing to do).
	Result string `json:"result"`
	// Replayed is true when the request id had settled before: nothing changed now.
	Replayed bool `json:"replayed,omitempty"`
	// Limits are what each limit holds after the settlement (none when exact).
	Limits []SettledLimit `json:"limits,omitempty"`
}

// SettledLimit is one limit after a settlement.
type SettledLimit struct {
	// Name is the limit's name.
	Name string `json:"name"`
	// Quota is its size.
	Quota int64 `json:"quota"`
	// Remaining is what it holds now.
	Remaining int64 `json:"remaining"`
	// Applied is what the settlement gave back (negative: debited).
	Applied int64 `json:"applied"`
}

// SettleHandler serves POST /v1/settle.
type SettleHandler struct {
	// Engine settles.
	Engine *engine.Engine
}

// ServeHTTP answers one settlement: 200 with what each limit holds, 400 naming the field
// at fault, 404 for an unknown policy, 409 for a request id used for another settlement,
// 503 when Redis did not settle (the reservation stands; retry with the same id).
func (h *SettleHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		jsonreply.Error(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	resp, status, err := h.settle(r.Context(), r.Body)
	if err != nil {
		jsonreply.Error(w, status, err.Error())
		return
	}
	jsonreply.Write(w, http.StatusOK, resp)
}

// settle decodes and applies one settlement body.
func (h *SettleHandler) settle(ctx context.Context, body io.Reader) (SettleResponse, int, error) {
	req, err := readSettle(body)
	if err != nil {
		return SettleResponse{}, http.StatusBadRequest, err
	}
	set, err := h.Engine.Snapshot()
	if err != nil {
		return SettleResponse{}, http.StatusServiceUnavailable, err
	}
	rule, c, status, err := CheckOf(set, req.check(req.Reserved))
	if err != nil {
		return SettleResponse{}, status, fmt.Errorf("reserved or the check's fields: %w", err)
	}
	if rule.Entry.Cost.Settle == nil {
		return SettleResponse{}, http.StatusBadRequest, fmt.Errorf("policy: %q settles no cost (its cost has no settle)", req.Policy)
	}
	o := rule.Reservation(c, time.UnixMilli(req.ReservedAtMs))
	if !o.Settles() {
		return SettleResponse{}, http.StatusBadRequest, errors.New("identity: the check counted no caller, so there is nothing to settle")
	}
	out, err := h.Engine.Settle(ctx, FrontName, &o, *req.Cost, true, req.RequestID)
	switch {
	case errors.Is(err, limiter.ErrAdjustReused):
		return SettleResponse{}, http.StatusConflict, fmt.Errorf("requestId: %w", limiter.ErrAdjustReused)
	case err != nil:
		return SettleResponse{}, http.StatusServiceUnavailable, fmt.Errorf("the reservation stands, retry with the same requestId: %w", err)
	}
	return settleResponseOf(&o, *req.Cost, out), 0, nil
}

// settleResponseOf is the answer to a settlement of o at cost that answered out.
func settleResponseOf(o *engine.Outcome, cost int64, out limiter.Adjusted) SettleResponse {
	resp := SettleResponse{Policy: o.Rule.Name(), Result: engine.SettleResult(o.Reserved(), cost), Replayed: out.Replayed}
	for _, l := range out.Limits {
		resp.Limits = append(resp.Limits, SettledLimit{Name: l.Name, Quota: l.Limit, Remaining: l.Remaining, Applied: l.Applied})
	}
	return resp
}

// readSettle decodes and checks a settlement body: JSON, one object, known fields only.
func readSettle(body io.Reader) (SettleRequest, error) {
	var req SettleRequest
	if err := readJSON(body, &req, "a settle request"); err != nil {
		return req, err
	}
	if err := req.validate(); err != nil {
		return req, err
	}
	switch {
	case req.Reserved < 1:
		return req, errors.New("reserved: required, the check answer's reserved (1 or more)")
	case req.ReservedAtMs <= 0:
		return req, errors.New("reservedAtMs: required, the check answer's reservedAtMs")
	case req.Cost == nil || *req.Cost < 0:
		return req, errors.New("cost: required, the cost the response stated (0 or more)")
	case req.RequestID == "":
		return req, errors.New("requestId: required, so that a retried settlement applies once")
	}
	return req, nil
}
