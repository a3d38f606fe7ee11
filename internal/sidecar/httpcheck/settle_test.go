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

// settlePolicy is a budget of 1000 tokens an hour whose cost (100 reserved by default, up
// to 500 stated) settles from the response.
func settlePolicy(name string) *v1alpha1.RateLimitPolicy {
	return sidecartest.Policy(name, 1000, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Algorithm = v1alpha1.AlgorithmFixedWindow
		s.Limits[0].Name, s.Limits[0].Period.Duration = "tokens", time.Hour
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
// at 30 gives 70 back (900 → 970 remaining), a retry under the same id is a replay, the id
// for another cost is 409, a settlement at 250 of a reservation of 100 debits 150, and a
// policy that settles nothing, a missing cost and a missing id are 400 naming the field.
func TestCheckAPISettle(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{}, settlePolicy("llm"), sidecartest.Policy("plain", 5))
	check, settle := &httpcheck.Handler{Engine: rig.Engine}, &httpcheck.SettleHandler{Engine: rig.Engine}
	code, resp, _, _ := scCheck(t, check, `{"policy":"llm","identity":"alice"}`)
	if code != http.StatusOK || resp.Reserved != 100 || resp.ReservedAtMs == 0 || resp.Remaining != 900 {
		t.Fatalf("check: %d %+v, want 100 reserved, 900 remaining", code, resp)
	}
	body := fmt.Sprintf(`{"policy":"llm","identity":"alice","reserved":100,"reservedAtMs":%d,"cost":30,"requestId":"call-1"}`, resp.ReservedAtMs)
	code, s, raw := scSettle(t, settle, body)
	if code != http.StatusOK || s.Result != "unreserved" || s.Replayed || len(s.Limits) != 1 || s.Limits[0].Remaining != 970 || s.Limits[0].Applied != 70 {
		t.Fatalf("settle at 30: %d %s", code, raw)
	}
	if code, s, raw = scSettle(t, settle, body); code != http.StatusOK || !s.Replayed || s.Limits[0].Remaining != 970 {
		t.Fatalf("retried: %d %s, want the first figures replayed", code, raw)
	}
	if code, _, raw = scSettle(t, settle, strings.Replace(body, `"cost":30`, `"cost":31`, 1)); code != http.StatusConflict {
		t.Fatalf("the id for another cost: %d %s, want 409", code, raw)
	}
	code, resp, _, _ = scCheck(t, check, `{"policy":"llm","identity":"alice"}`)
	body = fmt.Sprintf(`{"policy":"llm","identity":"alice","reserved":100,"reservedAtMs":%d,"cost":250,"requestId":"call-2"}`, resp.ReservedAtMs)
	if code, s, raw = scSettle(t, settle, body); code != http.StatusOK || s.Result != "charged" || s.Limits[0].Remaining != 720 {
		t.Fatalf("settle at 250 of 100: %d %s, want 720 remaining", code, raw)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"policy":"plain","identity":"alice","reserved":1,"reservedAtMs":1,"cost":3,"requestId":"x"}`, "policy"},
		{`{"policy":"llm","identity":"alice","reserved":100,"reservedAtMs":1,"requestId":"x"}`, "cost"},
		{`{"policy":"llm","identity":"alice","reserved":100,"reservedAtMs":1,"cost":3}`, "requestId"},
		{`{"policy":"llm","identity":"alice","reserved":600,"reservedAtMs":1,"cost":3,"requestId":"x"}`, "reserved"},
		{`{"policy":"llm","identity":"alice","reserved":100,"cost":3,"requestId":"x"}`, "reservedAtMs"},
	} {
		if code, _, raw := scSettle(t, settle, bad.body); code != http.StatusBadRequest || !strings.Contains(raw, bad.field) {
			t.Errorf("%s: %d %s, want 400 naming %s", bad.body, code, raw, bad.field)
		}
	}
	if code, resp, _, _ = scCheck(t, check, `{"policy":"plain","identity":"alice"}`); resp.Reserved != 0 || resp.ReservedAtMs != 0 {
		t.Fatalf("a policy that settles nothing: %d %+v, want no reservation", code, resp)
	}
}
