package usage

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// TestUsageTopUnderRBAC: in namespace A alice has spent her 5 per minute (and been denied),
// bob 2 and 20 others 1 each. A reader of A's usage gets the overview: 22 callers, 1 denied
// (a share of 1/22), alice first by hash with 5 of 5 used, then bob; n=1 shows alice alone,
// max=5 reads about 5 callers and says truncated. A reader of B is refused (403), and nothing read
// spent anything: bob still gets his 3 more (4 if a token refilled meanwhile).
func TestUsageTopUnderRBAC(t *testing.T) {
	r := startRig(t)
	a, b := kube.NewNamespace(t, r.env, "top-a-"), kube.NewNamespace(t, r.env, "top-b-")
	r.policy(t, a)
	r.policy(t, b)
	r.spend(t, a, "alice", 6)
	r.spend(t, a, "bob", 2)
	for i := range 20 {
		r.spend(t, a, fmt.Sprintf("caller-%d", i), 1)
	}
	reader := r.serviceAccount(t, a, "reader", usageRule("get"))
	readerB := r.serviceAccount(t, b, "reader", usageRule("get"))

	requireTopOfA(t, r, reader, a)
	// max bounds the callers read to about 5: a SCAN step returns whole hash-table buckets, so
	// a few more than asked may come back (never a whole second step's worth).
	if code, got, raw := r.top(t, reader, a, "?n=1&max=5"); code != http.StatusOK || len(got.Top) != 1 || got.Callers < 5 || got.Callers > 8 || !got.Truncated {
		t.Fatalf("top n=1 max=5: %d %s, want one ranked of 5 to 8 callers read, truncated", code, raw)
	}
	if code, _, raw := r.top(t, reader, a, "?n=1000"); code != http.StatusBadRequest || !strings.Contains(raw, "n:") {
		t.Fatalf("n=1000: %d %s, want 400 naming n", code, raw)
	}
	if code, _, raw := r.top(t, reader, a, "?tier=gold"); code != http.StatusBadRequest || !strings.Contains(raw, "tier:") {
		t.Fatalf("a tier the policy does not have: %d %s, want 400 naming tier", code, raw)
	}
	if code, _, raw := r.top(t, readerB, a, ""); code != http.StatusForbidden {
		t.Fatalf("B's reader on A: %d %s, want 403", code, raw)
	}
	if got := r.spend(t, a, "bob", 5); got < 3 || got > 4 {
		t.Fatalf("bob after the overviews: %d of 5 admitted, want 3 (4 if a token refilled meanwhile)", got)
	}
}

// requireTopOfA requires the whole overview of a: 22 callers, 1 denied, alice first by
// hash (denied, 5 used), bob second (2 used), no identity in the answer.
func requireTopOfA(t *testing.T, r *rig, reader, a string) {
	t.Helper()
	code, got, raw := r.top(t, reader, a, "")
	if code != http.StatusOK || got.Callers != 22 || got.Denied != 1 || got.Truncated || len(got.Top) != 10 {
		t.Fatalf("top of A: %d %s", code, raw)
	}
	if first := got.Top[0]; first.IdentityHash != snapshot.IdentityHash("alice") || first.Allowed || first.Limits[0].Used != 5 {
		t.Fatalf("top of A: first %+v, want alice (by hash), denied, 5 used", first)
	}
	if second := got.Top[1]; second.IdentityHash != snapshot.IdentityHash("bob") || second.Limits[0].Used != 2 {
		t.Fatalf("top of A: second %+v, want bob (by hash), 2 used", second)
	}
	if strings.Contains(raw, "alice") || strings.Contains(raw, "bob") {
		t.Fatalf("the overview names a caller: %s", raw)
	}
}

// top asks the usage API for ns's policyName overview with token and query ("?n=..."); it
// returns the status, the decoded answer and the raw body.
func (r *rig) top(t *testing.T, token, ns, query string) (int, usage.Top, string) {
	t.Helper()
	code, _, body := r.topRaw(t, token, ns, query)
	var out usage.Top
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
	}
	return code, out, body
}

// topRaw asks the usage API for ns's policyName overview with token and query; it returns
// the status, the answer's headers and its body.
func (r *rig) topRaw(t *testing.T, token, ns, query string) (int, http.Header, string) {
	t.Helper()
	u := fmt.Sprintf("%s/v1/namespaces/%s/ratelimitpolicies/%s/usage/top%s", r.url, ns, policyName, query)
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := r.client(t).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(body))
}
