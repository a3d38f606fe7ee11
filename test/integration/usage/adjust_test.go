package usage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestUsageChangesUnderRBAC: alice has spent her 5 per minute in namespace A. A
// ServiceAccount of A granted only get on ratelimitpolicies/usage may not grant, refund or
// reset (403); one granted get and update in A grants her 3 (applied exactly 3: 3 more of
// her requests pass), and the change is an Event on the policy naming the ServiceAccount and
// alice's hash, never alice. Retried under its request id the grant is answered as a replay,
// changes nothing and leaves no second Event; the id for another amount is a conflict (409).
// The editor is refused on B's policy, and without an identity (400). Its reset gives alice
// her 5 again; alice in B was never touched.
func TestUsageChangesUnderRBAC(t *testing.T) {
	r := startRig(t)
	a, b := kube.NewNamespace(t, r.env, "change-a-"), kube.NewNamespace(t, r.env, "change-b-")
	r.policy(t, a)
	r.policy(t, b)
	if got := r.spend(t, a, "alice", 6); got != 5 {
		t.Fatalf("alice: %d of 6 admitted by 5 per minute", got)
	}
	reader := r.serviceAccount(t, a, "reader", usageRule("get"))
	editor := r.serviceAccount(t, a, "editor", usageRule("get", "update"))
	grant := usage.AdjustRequest{Identity: "alice", Amount: 3, RequestID: "ticket-42"}

	requireReaderRefused(t, r, reader, a, grant)
	grantAndRetry(t, r, editor, a, grant)
	requireEditorRefused(t, r, editor, a, b, grant)
	if code, got, raw := r.adjust(t, editor, a, "reset", usage.AdjustRequest{Identity: "alice", RequestID: "ticket-43"}); code != http.StatusOK || got.Limits[0].Remaining != 5 {
		t.Fatalf("reset by the editor: %d %s, want 5 remaining", code, raw)
	}
	if n := r.spend(t, a, "alice", 6); n != 5 {
		t.Fatalf("alice after a reset: %d of 6 admitted, want 5", n)
	}
	if n := r.spend(t, b, "alice", 6); n != 5 {
		t.Fatalf("alice in B: %d of 6 admitted, want 5 (A's changes are A's)", n)
	}
	if log := r.out.String(); !strings.Contains(log, `"usage changed"`) || strings.Contains(log, "alice") {
		t.Errorf("manager log: want each change logged, never naming alice")
	}
}

// grantAndRetry grants alice 3 in ns as editor, retries it (a replay, no second Event), and
// requires the grant's id refused for another amount and exactly 3 more of alice's requests
// admitted.
func grantAndRetry(t *testing.T, r *rig, editor, ns string, grant usage.AdjustRequest) {
	t.Helper()
	a := ns
	code, got, raw := r.adjust(t, editor, a, "grant", grant)
	if code != http.StatusOK || got.Replayed || len(got.Limits) != 1 || got.Limits[0].Applied != 3 ||
		got.IdentityHash != snapshot.IdentityHash("alice") {
		t.Fatalf("grant 3 by the editor: %d %s", code, raw)
	}
	requireOneEvent(t, r, a, "UsageGranted", "system:serviceaccount:"+a+":editor", snapshot.IdentityHash("alice"), "ticket-42")
	again, _, raw := r.adjust(t, editor, a, "grant", grant)
	if again != http.StatusOK || !strings.Contains(raw, `"replayed":true`) {
		t.Fatalf("the grant retried: %d %s, want 200, replayed", again, raw)
	}
	other := grant
	other.Amount = 4
	if code, _, raw := r.adjust(t, editor, a, "grant", other); code != http.StatusConflict {
		t.Fatalf("the grant's id for 4: %d %s, want 409", code, raw)
	}
	if n := r.spend(t, a, "alice", 6); n < 3 || n > 4 {
		t.Fatalf("alice after a grant of 3 (retried): %d of 6 admitted, want 3 (4 if a token refilled meanwhile)", n)
	}
	requireOneEvent(t, r, a, "UsageGranted", "system:serviceaccount:"+a+":editor", snapshot.IdentityHash("alice"), "ticket-42")
}

// requireReaderRefused requires every change by a reader (get only) refused, naming the verb.
func requireReaderRefused(t *testing.T, r *rig, reader, ns string, grant usage.AdjustRequest) {
	t.Helper()
	for _, op := range []string{"grant", "refund", "reset"} {
		body := grant
		if op == "reset" {
			body.Amount = 0
		}
		if code, _, raw := r.adjust(t, reader, ns, op, body); code != http.StatusForbidden || !strings.Contains(raw, "update") {
			t.Fatalf("%s by a reader: %d %s, want 403 naming the verb", op, code, raw)
		}
	}
}

// requireEditorRefused requires an editor of a refused on b, and on bad bodies in a.
func requireEditorRefused(t *testing.T, r *rig, editor, a, b string, grant usage.AdjustRequest) {
	t.Helper()
	refusals := []struct {
		what, ns string
		body     usage.AdjustRequest
		code     int
	}{
		{"the editor on B", b, grant, http.StatusForbidden},
		{"no identity", a, usage.AdjustRequest{Amount: 3, RequestID: "t-1"}, http.StatusBadRequest},
		{"no request id", a, usage.AdjustRequest{Identity: "alice", Amount: 3}, http.StatusBadRequest},
		{"an amount of 0", a, usage.AdjustRequest{Identity: "alice", RequestID: "t-2"}, http.StatusBadRequest},
	}
	for _, c := range refusals {
		if code, _, raw := r.adjust(t, editor, c.ns, "grant", c.body); code != c.code || !strings.Contains(raw, `"error"`) {
			t.Errorf("%s: %d %s, want %d", c.what, code, raw, c.code)
		}
	}
}

// adjust posts an adjustment op of ns's policyName with token; it returns the status, the
// decoded answer and the raw body.
func (r *rig) adjust(t *testing.T, token, ns, op string, body usage.AdjustRequest) (int, usage.Adjusted, string) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("%s/v1/namespaces/%s/ratelimitpolicies/%s/usage/%s", r.url, ns, policyName, op)
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client(t).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	var out usage.Adjusted
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, out, strings.TrimSpace(buf.String())
}

// requireOneEvent waits for exactly one Event of reason on ns's policyName, its note holding
// every one of want, and requires it never to name alice.
func requireOneEvent(t *testing.T, r *rig, ns, reason string, want ...string) {
	t.Helper()
	var found []eventsv1.Event
	wait.Eventually(t, 30*time.Second, "an Event "+reason+" on "+policyName, func() error {
		var list eventsv1.EventList
		if err := r.env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		found = found[:0]
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Name == policyName && e.Regarding.Kind == "RateLimitPolicy" {
				found = append(found, e)
			}
		}
		if len(found) == 0 {
			return fmt.Errorf("none of %d events", len(list.Items))
		}
		return nil
	})
	if len(found) != 1 || !kube.ContainsAll(found[0].Note, want) || strings.Contains(found[0].Note, "alice") {
		t.Fatalf("events %s on %s: %+v; want one whose note holds %q and never alice", reason, policyName, found, want)
	}
	t.Logf("event %s: %s", reason, found[0].Note)
}
