package httpcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// SettlePath is where the check API settles a reservation.
const SettlePath = "/v1/settle"

// SettleRequest is the body of POST /v1/settle: the check that reserved (its policy,
// identity or parts, and tier or request, as the check stated them), the reservation its
// answer carried, and the cost the response stated.
type SettleRequest struct {
	// Caller is the check's caller, as the check named it: a reservation settles only for the
	// caller, policy and tier it was made for.
	Caller
	// Reservation is the id the check's answer carried (Response.Reservation). Required.
	Reservation string `json:"reservation"`
	// Cost is the cost the response stated, 0 or more. Required.
	Cost *int64 `json:"cost"`
}

// SettleResponse is the answer to a settlement.
type SettleResponse struct {
	// Policy is the policy settled.
	Policy string `json:"policy"`
	// Result is charged (cost above the reservation: the rest debited, even past the
	// limit), unreserved (below: the difference given back), or exact (nothing to do).
	Result string `json:"result"`
	// Replayed is true when the reservation had settled before at this cost: nothing changed
	// now.
	Replayed bool `json:"replayed,omitempty"`
	// Reserved is the cost the reservation held.
	Reserved int64 `json:"reserved"`
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
// at fault, 404 for an unknown policy or a reservation the caller does not hold (never made
// for this caller, policy and tier, expired, or settled over a minute ago), 409 for a
// reservation settled before at another cost, 503 when Redis did not settle (the
// reservation stands; retry).
func (h *SettleHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	servePOST(w, r, h.settle)
}

// settle decodes and applies one settlement body.
func (h *SettleHandler) settle(ctx context.Context, body io.Reader) (SettleResponse, int, error) {
	req, err := readSettle(body)
	if err != nil {
		return SettleResponse{}, http.StatusBadRequest, err
	}
	_, rule, c, status, err := checkOn(h.Engine, req.check(1))
	if err != nil {
		return SettleResponse{}, status, fmt.Errorf("the check's fields: %w", err)
	}
	if rule.Entry.Cost.Settle == nil {
		return SettleResponse{}, http.StatusBadRequest, fmt.Errorf("policy: %q settles no cost (its cost has no settle)", req.Policy)
	}
	if !c.HasIdentity && !rule.CountsWithoutIdentity() {
		return SettleResponse{}, http.StatusBadRequest, errors.New("identity: the check counted no caller, so there is nothing to settle")
	}
	out, err := h.Engine.SettleReservation(ctx, FrontName, rule, c, req.Reservation, *req.Cost)
	switch {
	case errors.Is(err, limiter.ErrNoReservation):
		return SettleResponse{}, http.StatusNotFound, fmt.Errorf("reservation: %w", limiter.ErrNoReservation)
	case errors.Is(err, limiter.ErrAdjustReused):
		return SettleResponse{}, http.StatusConflict, errors.New("reservation: settled before at another cost")
	case err != nil:
		return SettleResponse{}, http.StatusServiceUnavailable, fmt.Errorf("the reservation stands, retry: %w", err)
	}
	return settleResponseOf(rule, out, *req.Cost), 0, nil
}

// settleResponseOf is the answer to a settlement of a reservation on rule at cost that
// answered out.
func settleResponseOf(rule *engine.Rule, out limiter.Settled, cost int64) SettleResponse {
	resp := SettleResponse{Policy: rule.Name(), Result: engine.SettleResult(out.Reserved, cost), Replayed: out.Replayed,
		Reserved: out.Reserved}
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
	case !limiter.IsID(req.Reservation):
		return req, fmt.Errorf("reservation: required, the check answer's reservation (%d hexadecimal digits)", limiter.ReservationIDLength)
	case req.Cost == nil || *req.Cost < 0 || *req.Cost > limiter.MaxAdjustAmount:
		return req, fmt.Errorf("cost: required, the cost the response stated (0 to %d)", limiter.MaxAdjustAmount)
	}
	return req, nil
}
