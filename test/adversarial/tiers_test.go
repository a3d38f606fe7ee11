package adversarial

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
)

// freeLimit and proLimit are the two tiers of tieredPolicy: one limit name, one period.
const freeLimit, proLimit = 5, 20

// tieredPolicy limits X-API-Key callers to freeLimit per hour, and those sending
// X-Plan: pro to proLimit per hour on the same counter ("limit").
func tieredPolicy(alg v1alpha1.Algorithm) *v1alpha1.RateLimitPolicy {
	return newPolicy("plans", alg, freeLimit, time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Tiers = []v1alpha1.Tier{{Name: "pro", When: `headers["x-plan"] == "pro"`,
			Limits: []v1alpha1.Limit{{Name: "limit", Requests: proLimit, Period: metav1.Duration{Duration: time.Hour}}}}}
	})
}

// Class: over-admission through tiers. Many concurrent requests of callers of both tiers
// are admitted exactly to their tier's limit, no more, on every algorithm.
func TestTiersAdmitExactlyTheirLimitsUnderConcurrency(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, limiter.Options{}, tieredPolicy(alg))
			for caller, want := range map[string]int{"free-a": freeLimit, "free-b": freeLimit, "pro-a": proLimit, "pro-b": proLimit} {
				header := []string{"X-API-Key", caller}
				if caller[:3] == "pro" {
					header = append(header, "X-Plan", "pro")
				}
				got := r.hammer(8, 8, "/", header, nil)
				onlyAdmitOrDeny(t, got)
				if got[http.StatusOK] != want {
					t.Errorf("%s: %d of 64 concurrent requests admitted, want exactly %d (over-admission %d)",
						caller, got[http.StatusOK], want, got[http.StatusOK]-want)
				}
			}
		})
	}
}

// Class: choosing one's own tier by sending its header twice. The condition would read one
// value and the upstream maybe another: the request is refused, and debits nothing.
func TestTierHeaderSentTwiceIsRefused(t *testing.T) {
	r := newRig(t, limiter.Options{}, tieredPolicy(v1alpha1.AlgorithmFixedWindow))
	if got := r.send(http.MethodGet, "/", "X-API-Key", "mallory", "X-Plan", "free", "X-Plan", "pro"); got != http.StatusBadRequest {
		t.Fatalf("X-Plan sent twice: %d, want 400", got)
	}
	if got := r.count(freeLimit+1, http.MethodGet, "/", "X-API-Key", "mallory"); got != freeLimit {
		t.Errorf("after the refused request: %d of %d admitted, want %d (a refused request debits nothing)", got, freeLimit+1, freeLimit)
	}
}

// A caller moved to another tier mid-window keeps what it has used (issue 28, item 4): an
// upgrade leaves the new limit less what was used, a downgrade below it denies. On every
// algorithm, within a second of an hour-long period (no refill to speak of).
func TestTierChangeMidWindowKeepsUsage(t *testing.T) {
	const used = 3
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, limiter.Options{}, tieredPolicy(alg))
			if got := r.count(used, http.MethodGet, "/", "X-API-Key", "up"); got != used {
				t.Fatalf("free: %d of %d admitted", got, used)
			}
			if got := r.count(proLimit, http.MethodGet, "/", "X-API-Key", "up", "X-Plan", "pro"); got != proLimit-used {
				t.Errorf("upgraded after using %d of %d: %d of %d admitted, want %d", used, freeLimit, got, proLimit, proLimit-used)
			}
			if got := r.count(10, http.MethodGet, "/", "X-API-Key", "down", "X-Plan", "pro"); got != 10 {
				t.Fatalf("pro: %d of 10 admitted", got)
			}
			if got := r.count(freeLimit, http.MethodGet, "/", "X-API-Key", "down"); got != 0 {
				t.Errorf("downgraded after using 10 of %d: %d of %d admitted, want 0", proLimit, got, freeLimit)
			}
		})
	}
}

// The check API states its tier (a caller that knows its plan) or the request that chooses
// it, and reports the tier it checked; /v1/plan answers the same question debiting nothing.
func TestCheckAPITiers(t *testing.T) {
	r := newRig(t, limiter.Options{}, tieredPolicy(v1alpha1.AlgorithmGCRA))
	for _, tc := range []struct {
		req      checkwire.Request
		tier     string
		quota    int64
		planOnly bool
	}{
		{checkwire.Request{Policy: "plans", Identity: "a"}, "default", freeLimit, false},
		{checkwire.Request{Policy: "plans", Identity: "b", Tier: "pro"}, "pro", proLimit, false},
		{checkwire.Request{Policy: "plans", Identity: "c", Request: &checkwire.Attributes{Headers: map[string]string{"X-Plan": "pro"}}}, "pro", proLimit, false},
		{checkwire.Request{Policy: "plans", Identity: "d", Request: &checkwire.Attributes{Headers: map[string]string{"X-Plan": "free"}}}, "default", freeLimit, false},
	} {
		got := r.checkAPI(t, tc.req)
		if got.Tier != tc.tier || got.Quota != tc.quota || !got.Allowed {
			t.Errorf("%+v: tier %q quota %d allowed %v, want %q %d true", tc.req, got.Tier, got.Quota, got.Allowed, tc.tier, tc.quota)
		}
		plan := r.planAPI(t, tc.req)
		if plan.Tier != tc.tier || len(plan.Limits) != 1 || plan.Limits[0].Requests != tc.quota {
			t.Errorf("plan %+v: %+v, want tier %q with %d requests", tc.req, plan, tc.tier, tc.quota)
		}
	}
	// /v1/plan debits nothing: after 100 questions, the caller still has its whole limit.
	for range 100 {
		r.planAPI(t, checkwire.Request{Policy: "plans", Identity: "e", Tier: "pro"})
	}
	if got := r.checkAPI(t, checkwire.Request{Policy: "plans", Identity: "e", Tier: "pro"}); got.Remaining != proLimit-1 {
		t.Errorf("after 100 plan questions and one check: remaining %d, want %d", got.Remaining, proLimit-1)
	}
	for _, bad := range []checkwire.Request{
		{Policy: "plans", Identity: "x", Tier: "gold"},
		{Policy: "plans", Identity: "x", Tier: "pro", Request: &checkwire.Attributes{}},
	} {
		if status := r.checkStatus(t, bad); status != http.StatusBadRequest {
			t.Errorf("%+v: %d, want 400", bad, status)
		}
	}
}

// planAPI asks /v1/plan.
func (r *rig) planAPI(t *testing.T, req checkwire.Request) httpcheck.PlanResponse {
	t.Helper()
	var out httpcheck.PlanResponse
	if status := r.postJSON(t, httpcheck.PlanPath, req, &out); status != http.StatusOK {
		t.Fatalf("plan API answered %d", status)
	}
	return out
}

// checkStatus is the check API's status for req.
func (r *rig) checkStatus(t *testing.T, req checkwire.Request) int {
	t.Helper()
	return r.postJSON(t, httpcheck.Path, req, nil)
}

// Class: dodging one's debt by dropping to a lower tier and back. A pro caller that has
// used most of its limit sends one request that selects the free tier (it leaves out what
// makes it pro), is denied, and comes back as pro: it has what it had left, not a fresh
// allowance, on every algorithm, however often it tries.
func TestTierDownAndBackKeepsDebt(t *testing.T) {
	const used = 15
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, limiter.Options{}, tieredPolicy(alg))
			if got := r.count(used, http.MethodGet, "/", "X-API-Key", "dodger", "X-Plan", "pro"); got != used {
				t.Fatalf("pro: %d of %d admitted", got, used)
			}
			for range 3 {
				if got := r.count(1, http.MethodGet, "/", "X-API-Key", "dodger"); got != 0 {
					t.Fatalf("as free after using %d: admitted", used)
				}
			}
			if got := r.count(proLimit, http.MethodGet, "/", "X-API-Key", "dodger", "X-Plan", "pro"); got != proLimit-used {
				t.Errorf("back as pro: %d of %d admitted, want %d (over-admission %d)", got, proLimit, proLimit-used, got-(proLimit-used))
			}
		})
	}
}
