package httpcheck

import (
	"context"
	"io"
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// PlanPath is where the plan API is served: which tier and limits apply to a check,
// debiting nothing.
const PlanPath = "/v1/plan"

// PlanResponse is the answer of POST /v1/plan.
type PlanResponse struct {
	// Policy is the policy asked about.
	Policy string `json:"policy"`
	// Tier is the tier whose limits apply.
	Tier string `json:"tier"`
	// Limits are that tier's limits.
	Limits []PlanLimit `json:"limits"`
	// SnapshotVersion is the snapshot the answer was read from.
	SnapshotVersion string `json:"snapshotVersion"`
}

// PlanLimit is one limit of a tier.
type PlanLimit struct {
	// Name of the limit.
	Name string `json:"name"`
	// Requests per PeriodMs.
	Requests int64 `json:"requests"`
	// PeriodMs is the period in milliseconds.
	PeriodMs int64 `json:"periodMs"`
	// Calendar, for a calendar limit, is its unit and time zone; PeriodMs is then the
	// unit's nominal length.
	Calendar *snapshot.Calendar `json:"calendar,omitempty"`
	// Burst is the bucket's capacity, for TokenBucket and GCRA.
	Burst int64 `json:"burst,omitempty"`
}

// PlanHandler serves POST /v1/plan: the body of a check, answered with the tier and the
// limits that check would run against.
type PlanHandler struct {
	// Engine holds the snapshot.
	Engine *engine.Engine
}

// ServeHTTP answers one plan question.
func (h *PlanHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	servePOST(w, r, h.plan)
}

// plan decodes one check body and answers the tier and limits it would run against.
func (h *PlanHandler) plan(_ context.Context, body io.Reader) (PlanResponse, int, error) {
	req, status, err := readRequest(body)
	if err != nil {
		return PlanResponse{}, status, err
	}
	set, rule, c, status, err := checkOn(h.Engine, &req)
	if err != nil {
		return PlanResponse{}, status, err
	}
	return PlanResponse{Policy: rule.Name(), Tier: c.Tier.Name, Limits: planLimits(c.Tier.Limits),
		SnapshotVersion: set.Version}, 0, nil
}

func planLimits(ls []snapshot.Limit) []PlanLimit {
	out := make([]PlanLimit, 0, len(ls))
	for _, l := range ls {
		out = append(out, PlanLimit{Name: l.Name, Requests: l.Requests, PeriodMs: l.PeriodMs, Burst: l.Burst, Calendar: l.Calendar})
	}
	return out
}
