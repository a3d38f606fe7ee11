package adversarial

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
)

// Issue 39, item 2: POST /v1/settle trusted the reservation its body stated (reserved,
// reservedAtMs) and applied once per request id the body chose, so a caller could give
// itself back what it never reserved, or the same reservation many times. A settlement must
// name a reservation the sidecar made, for that caller and policy, and count once.

// llmBudget is a budget of 1000 tokens a year per X-API-Key (a fixed window no run
// crosses), each call reserving 100 unless it states up to 500, settled from the response.
func llmBudget(name string) *v1alpha1.RateLimitPolicy {
	return newPolicy(name, v1alpha1.AlgorithmFixedWindow, 1000, 8760*time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}}}
		most := int64(500)
		s.Cost = &v1alpha1.Cost{Default: 100, Header: "X-Cost", Max: &most, Settle: &v1alpha1.CostSettle{Header: "X-Tokens"}}
	})
}

// checkAnswer asks the check API about identity at cost and returns its answer as JSON
// fields, whatever they are.
func (r *rig) checkAnswer(t *testing.T, policy, identity string, cost int64) map[string]any {
	t.Helper()
	out := map[string]any{}
	if code := r.postJSON(t, httpcheck.Path, map[string]any{"policy": policy, "identity": identity, "cost": cost}, &out); code != http.StatusOK && code != http.StatusTooManyRequests {
		t.Fatalf("check: %d %v", code, out)
	}
	return out
}

// admittedCost asks for cost repeatedly as identity until denied (at most n times) and
// returns the units admitted.
func (r *rig) admittedCost(t *testing.T, policy, identity string, cost int64, n int) int64 {
	t.Helper()
	var total int64
	for range n {
		if a := r.checkAnswer(t, policy, identity, cost); a["allowed"] == true {
			total += cost
		}
	}
	return total
}

// settleLike is a settlement at 0 of the reservation a check answered, as a client of the
// check API sends it: the reservation id the answer carries or, from an answer without one
// (the check API of issue 39), the reservation it stated and a request id of the client's
// choosing.
func settleLike(policy, identity string, answer map[string]any, requestID string) map[string]any {
	body := map[string]any{"policy": policy, "identity": identity, "cost": 0}
	if id, ok := answer["reservation"]; ok {
		body["reservation"] = id
		return body
	}
	body["reserved"], body["reservedAtMs"], body["requestId"] = answer["reserved"], answer["reservedAtMs"], requestID
	return body
}

// forged are settlements of reservations nobody made, of reserved units at cost 0: one as
// the check API of issue 39 took them (the reservation stated), one naming an id the
// sidecar never issued.
func forged(policy, identity string, reserved int64, n int) []map[string]any {
	return []map[string]any{
		{"policy": policy, "identity": identity, "reserved": reserved, "reservedAtMs": time.Now().UnixMilli(),
			"cost": 0, "requestId": fmt.Sprintf("forged-%d", n)},
		{"policy": policy, "identity": identity, "reservation": limiter.NewID(), "cost": 0},
	}
}

// TestSettlementGivesBackOnlyWhatWasReserved (issue 39, item 2 a): two reservations of 100;
// the first settled at 0 as it should be, then settled again at 0 (as its answer gave it,
// and under a new request id): 100 given back once. Issue 39 measured 100 more given back
// per extra settlement (the second reservation's tokens, freed).
func TestSettlementGivesBackOnlyWhatWasReserved(t *testing.T) {
	r := newRig(t, limiter.Options{}, llmBudget("llm"))
	first := r.checkAnswer(t, "llm", "alice", 100)
	r.checkAnswer(t, "llm", "alice", 100)
	if code := r.postJSON(t, httpcheck.SettlePath, settleLike("llm", "alice", first, "call-1"), nil); code != http.StatusOK {
		t.Fatalf("the first settlement: %d", code)
	}
	for i := range 3 {
		r.postJSON(t, httpcheck.SettlePath, settleLike("llm", "alice", first, fmt.Sprintf("again-%d", i)), nil)
	}
	// 100 used (the second reservation): 900 left.
	if got := r.admittedCost(t, "llm", "alice", 100, 12); got != 900 {
		t.Fatalf("%d admitted after one reservation of 100 settled at 0 four times, want 900 (100 still reserved)", got)
	}
}

// TestInventedReservationsGiveNothingBack (issue 39, item 2 b): "check 500, check 500, settle
// two invented reservations of 500 at 0", ten times: issue 39 measured 10,000 admitted on a
// budget of 1,000 in one window. At most 1,000 may be.
func TestInventedReservationsGiveNothingBack(t *testing.T) {
	r := newRig(t, limiter.Options{}, llmBudget("llm"))
	var admitted int64
	for round := range 10 {
		admitted += r.admittedCost(t, "llm", "mallory", 500, 2)
		for k := range 2 {
			for _, body := range forged("llm", "mallory", 500, 2*round+k) {
				if code := r.postJSON(t, httpcheck.SettlePath, body, nil); code == http.StatusOK {
					t.Errorf("round %d: an invented reservation settled: %v", round, body)
				}
			}
		}
	}
	if admitted > 1000 {
		t.Fatalf("%d tokens admitted on a budget of 1000", admitted)
	}
}
