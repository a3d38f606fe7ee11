package adversarial

import (
	"net/http"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
)

// Beyond issue 39's list, on the same surface: what a caller that learns another's
// reservation, or settled its own before, can do with it (nothing).

// TestReservationIsBoundToItsCaller: mallory learns alice's reservation id (a log, a shared
// client) and settles it at 0 under her own name, and under alice's on another policy: no
// effect anywhere. A reservation settles only for the caller and policy it was made for.
func TestReservationIsBoundToItsCaller(t *testing.T) {
	r := newRig(t, limiter.Options{}, llmBudget("llm"), llmBudget("other"))
	alice := r.checkAnswer(t, "llm", "alice", 500)
	r.checkAnswer(t, "llm", "mallory", 500)
	r.checkAnswer(t, "other", "alice", 500)
	for _, body := range []map[string]any{
		settleLike("llm", "mallory", alice, "m-1"),
		settleLike("other", "alice", alice, "m-2"),
	} {
		if code := r.postJSON(t, httpcheck.SettlePath, body, nil); code == http.StatusOK {
			t.Errorf("alice's reservation settled as %v", body)
		}
	}
	for _, c := range []struct{ policy, identity string }{{"llm", "alice"}, {"llm", "mallory"}, {"other", "alice"}} {
		if got := r.admittedCost(t, c.policy, c.identity, 500, 3); got != 500 {
			t.Errorf("%s on %s: %d admitted after a reservation of 500, want 500", c.identity, c.policy, got)
		}
	}
}

// TestSettledReservationCannotBeResettled: a reservation of 500 settled at 400 (100 back)
// cannot be settled again at 0 to take the other 400: the second settlement at another cost
// is refused (409), and the replay at the same cost changes nothing.
func TestSettledReservationCannotBeResettled(t *testing.T) {
	r := newRig(t, limiter.Options{}, llmBudget("llm"))
	answer := r.checkAnswer(t, "llm", "alice", 500)
	id, _ := answer["reservation"].(string)
	if !limiter.IsID(id) {
		t.Fatalf("check answer %v: no reservation id", answer)
	}
	body := map[string]any{"policy": "llm", "identity": "alice", "reservation": id, "cost": 400}
	if code := r.postJSON(t, httpcheck.SettlePath, body, nil); code != http.StatusOK {
		t.Fatalf("settle at 400: %d", code)
	}
	body["cost"] = 0
	if code := r.postJSON(t, httpcheck.SettlePath, body, nil); code != http.StatusConflict {
		t.Fatalf("settle again at 0: %d, want 409", code)
	}
	body["cost"] = 400
	if code := r.postJSON(t, httpcheck.SettlePath, body, nil); code != http.StatusOK {
		t.Fatalf("replay at 400: %d", code)
	}
	if got := r.admittedCost(t, "llm", "alice", 100, 8); got != 600 {
		t.Fatalf("%d admitted after 400 used, want 600", got)
	}
}
