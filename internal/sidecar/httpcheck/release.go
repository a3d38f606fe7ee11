package httpcheck

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// ReleasePath is where the check API gives back a concurrency slot.
const ReleasePath = "/v1/release"

// ReleaseRequest is the body of POST /v1/release: the check that took the slot (its policy,
// identity or parts, and tier or request, as the check stated them) and the slot its answer
// carried.
type ReleaseRequest struct {
	// Caller is the check's caller, as the check named it.
	Caller
	// Slot is the slot the check's answer carried (Response.Slot, 32 bytes). Required.
	Slot string `json:"slot"`
}

// ReleaseResponse is the answer to a release.
type ReleaseResponse struct {
	// Policy is the policy whose slot was given back.
	Policy string `json:"policy"`
	// Released is true when the slot was held and is given back, false when it was not
	// (released before, or expired): either way it is free now.
	Released bool `json:"released"`
}

// ReleaseHandler serves POST /v1/release.
type ReleaseHandler struct {
	// Engine releases.
	Engine *engine.Engine
}

// ServeHTTP answers one release: 200 whether or not the slot was still held, 400 naming
// the field at fault, 404 for an unknown policy, 503 when Redis did not answer (the slot
// comes back when it expires; retry).
func (h *ReleaseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	servePOST(w, r, h.release)
}

// release decodes and applies one release body.
func (h *ReleaseHandler) release(ctx context.Context, body io.Reader) (ReleaseResponse, int, error) {
	req, err := readRelease(body)
	if err != nil {
		return ReleaseResponse{}, http.StatusBadRequest, err
	}
	_, rule, c, status, err := checkOn(h.Engine, req.check(0))
	if err != nil {
		return ReleaseResponse{}, status, err
	}
	if rule.Entry.Concurrency == nil {
		return ReleaseResponse{}, http.StatusBadRequest, fmt.Errorf("policy: %q has no concurrency limit", req.Policy)
	}
	o := rule.Holding(c, req.Slot)
	held, err := h.Engine.Release(ctx, FrontName, &o)
	if err != nil {
		return ReleaseResponse{}, http.StatusServiceUnavailable, fmt.Errorf("the slot comes back when it expires; retry: %w", err)
	}
	return ReleaseResponse{Policy: req.Policy, Released: held}, 0, nil
}

// readRelease decodes and checks a release body: JSON, one object, known fields only.
func readRelease(body io.Reader) (ReleaseRequest, error) {
	var req ReleaseRequest
	if err := readJSON(body, &req, "a release request"); err != nil {
		return req, err
	}
	if err := req.validate(); err != nil {
		return req, err
	}
	if len(req.Slot) != limiter.SlotIDLength {
		return req, fmt.Errorf("slot: required, the check answer's slot (%d bytes)", limiter.SlotIDLength)
	}
	return req, nil
}
