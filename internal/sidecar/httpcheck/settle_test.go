package httpcheck_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// settlePolicy is a budget of 1000 tokens a year whose cost (100 reserved by default, up
// to 500 stated) settles from the response.
func settlePolicy(name string) *v1alpha1.RateLimitPolicy {
	return sidecartest.Policy(name, 1000, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Algorithm = v1alpha1.AlgorithmFixedWindow
		s.Limits[0].Name, s.Limits[0].Period.Duration = "tokens", 8760*time.Hour // no run crosses a yearly window's end
		s.FailureMode = v1alpha1.FailureModeFailClosed
		most := int64(500)
		s.Cost = &v1alpha1.Cost{Default: 100, Max: &most, Settle: &v1alpha1.CostSettle{Header: "X-Tokens"}}
	})
}

// scSettle posts body to the settle handler and decodes a 200's answer.
func scSettle(t *testing.T, h http.Handler, body string) (int, httpcheck.SettleResponse, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, httpcheck.SettlePath, strings.NewReader(body)))
	var resp httpcheck.SettleResponse
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("decode %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, resp, rec.Body.String()
}

// TestCheckAPISettle: a check of a policy that settles answers its reservation; settling it
// at 30 gives 70 back (900 → 970 remaining), a retry at that cost is a replay, the
// reservation at another cost is 409, a settlement at 250 of a reservation of 100 debits
// 150, and a reservation named by another caller, invented, or settled before under a
// fresh body is 404: a settlement counts only for a reservation the sidecar recorded, once.
func TestCheckAPISettle(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, settlePolicy("llm"), sidecartest.Policy("plain", 5))
	check, settle := &httpcheck.Handler{Engine: rig.Engine}, &httpcheck.SettleHandler{Engine: rig.Engine}
	code, resp, _, _ := scCheck(t, check, `{"policy":"llm","identity":"alice"}`)
	if code != http.StatusOK || resp.Reserved != 100 || !limiter.IsID(resp.Reservation) || resp.Remaining != 900 {
		t.Fatalf("check: %d %+v, want 100 reserved under an id, 900 remaining", code, resp)
	}
	body := fmt.Sprintf(`{"policy":"llm","identity":"alice","reservation":%q,"cost":30}`, resp.Reservation)
	first := wantSettled(t, settle, body, "unreserved", 970, false)
	if first.Limits[0].Applied != 70 || first.Reserved != 100 {
		t.Fatalf("settle at 30: %+v, want 70 given back of 100 reserved", first)
	}
	wantSettled(t, settle, body, "unreserved", 970, true)
	if code, _, raw := scSettle(t, settle, strings.Replace(body, `"cost":30`, `"cost":31`, 1)); code != http.StatusConflict {
		t.Fatalf("the reservation at another cost: %d %s, want 409", code, raw)
	}
	_, resp, _, _ = scCheck(t, check, `{"policy":"llm","identity":"alice"}`)
	for _, bad := range []string{
		fmt.Sprintf(`{"policy":"llm","identity":"mallory","reservation":%q,"cost":0}`, resp.Reservation),
		fmt.Sprintf(`{"policy":"llm","identity":"alice","reservation":%q,"cost":0}`, limiter.NewID()),
	} {
		if code, _, raw := scSettle(t, settle, bad); code != http.StatusNotFound {
			t.Fatalf("%s: %d %s, want 404", bad, code, raw)
		}
	}
	body = fmt.Sprintf(`{"policy":"llm","identity":"alice","reservation":%q,"cost":250}`, resp.Reservation)
	wantSettled(t, settle, body, "charged", 720, false)
}

// wantSettled posts the settlement body and requires it answered 200 with result, the one
// limit's remaining, and replayed as said.
func wantSettled(t *testing.T, h http.Handler, body, result string, remaining int64, replayed bool) httpcheck.SettleResponse {
	t.Helper()
	code, s, raw := scSettle(t, h, body)
	if code != http.StatusOK || s.Result != result || s.Replayed != replayed || len(s.Limits) != 1 || s.Limits[0].Remaining != remaining {
		t.Fatalf("%s: %d %s, want %s with %d remaining (replayed %v)", body, code, raw, result, remaining, replayed)
	}
	return s
}

// TestCheckAPISettleRefusesBadBodies: a policy that settles nothing, and a settlement
// without its cost or reservation, or stating what it reserved (the sidecar's record says),
// are 400 naming the field; a check of a policy that settles nothing answers no
// reservation.
func TestCheckAPISettleRefusesBadBodies(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, settlePolicy("llm"), sidecartest.Policy("plain", 5))
	check, settle := &httpcheck.Handler{Engine: rig.Engine}, &httpcheck.SettleHandler{Engine: rig.Engine}
	id := limiter.NewID()
	for _, bad := range []struct{ body, field string }{
		{`{"policy":"plain","identity":"alice","reservation":"` + id + `","cost":3}`, "policy"},
		{`{"policy":"llm","identity":"alice","reservation":"` + id + `"}`, "cost"},
		{`{"policy":"llm","identity":"alice","cost":3}`, "reservation"},
		{`{"policy":"llm","identity":"alice","reservation":"` + strings.ToUpper(id) + `","cost":3}`, "reservation"},
		{`{"policy":"llm","identity":"alice","reservation":"` + id + `","reserved":100,"cost":3}`, "reserved"},
		{`{"policy":"llm","identity":"alice","reservation":"` + id + `","reservedAtMs":1,"cost":3}`, "reservedAtMs"},
	} {
		if code, _, raw := scSettle(t, settle, bad.body); code != http.StatusBadRequest || !strings.Contains(raw, bad.field) {
			t.Errorf("%s: %d %s, want 400 naming %s", bad.body, code, raw, bad.field)
		}
	}
	if code, resp, _, _ := scCheck(t, check, `{"policy":"plain","identity":"alice"}`); resp.Reserved != 0 || resp.Reservation != "" {
		t.Fatalf("a policy that settles nothing: %d %+v, want no reservation", code, resp)
	}
}
