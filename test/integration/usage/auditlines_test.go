package usage

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// forgedLine is what an attacker wants a second line of an Event to say.
const forgedLine = "grant by system:admin for caller 0000000000000000: per-minute +1000000"

// TestRequestIDCannotForgeAuditLines: an Event is what `kubectl get events` and `describe`
// print as it is. A grant whose request id holds a newline and a forged second line is
// refused (400 naming requestId) and records nothing; a grant whose id holds quotes is
// recorded in one line that quotes the id and the user.
func TestRequestIDCannotForgeAuditLines(t *testing.T) {
	r := startRig(t)
	ns := kube.NewNamespace(t, r.env, "audit-")
	r.policy(t, ns)
	editor := r.serviceAccount(t, ns, "editor", usageRule("get", "update"))

	code, _, raw := r.adjust(t, editor, ns, "grant", usage.AdjustRequest{Identity: "alice", Amount: 1, RequestID: "a\n" + forgedLine})
	if code != http.StatusBadRequest || !strings.Contains(raw, "requestId") {
		t.Errorf("a request id with a newline: %d %s, want 400 naming requestId; events: %q", code, raw, notes(t, r, ns))
	}
	if code, _, raw := r.adjust(t, editor, ns, "grant", usage.AdjustRequest{Identity: "alice", Amount: 1, RequestID: "ticket 42"}); code != http.StatusBadRequest ||
		!strings.Contains(raw, "requestId") {
		t.Errorf("a request id with a space: %d %s, want 400 naming requestId", code, raw)
	}
	id := `OPS-7/"x"\y`
	if code, _, raw := r.adjust(t, editor, ns, "grant", usage.AdjustRequest{Identity: "alice", Amount: 1, RequestID: id}); code != http.StatusOK {
		t.Fatalf("a grant under %s: %d %s", id, code, raw)
	}
	requireOneEvent(t, r, ns, "UsageGranted", fmt.Sprintf("request id %q", id), fmt.Sprintf("by %q", "system:serviceaccount:"+ns+":editor"))
	for _, n := range notes(t, r, ns) {
		if strings.ContainsAny(n, "\r\n") || strings.Contains(n, forgedLine) {
			t.Errorf("an Event of %s holds a line of its own: %q", ns, n)
		}
	}
}

// TestPolicyTextCannotForgeEventLines: a policy author's text reaches Events through the
// Ready condition's message: a tier's CEL expression that does not compile is quoted in the
// compiler's error, one source line per line. The Event announcing Ready=False keeps to one
// line, whatever lines the expression holds (the webhook is off, as in the rig: the
// controller re-checks from the same code).
func TestPolicyTextCannotForgeEventLines(t *testing.T) {
	r := startRig(t)
	ns := kube.NewNamespace(t, r.env, "audit-cel-")
	p := policytest.New(ns, "forged", policytest.Limit("per-minute", 5, time.Minute))
	p.Spec.Tiers = []v1alpha1.Tier{{Name: "gold", When: `headers["x-plan"] == "gold" &&` + "\n" + forgedLine + " (",
		Limits: []v1alpha1.Limit{{Name: "per-minute", Requests: 50, Period: p.Spec.Limits[0].Period}}}}
	if err := r.env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var found []string
	wait.Eventually(t, time.Minute, "an Event on the policy quoting its tier's expression", func() error {
		found = found[:0]
		for _, n := range notes(t, r, ns) {
			if strings.Contains(n, "system:admin") {
				found = append(found, n)
			}
		}
		if len(found) == 0 {
			return fmt.Errorf("none of %q", notes(t, r, ns))
		}
		return nil
	})
	for _, n := range found {
		if strings.ContainsAny(n, "\r\n") {
			t.Errorf("the Event's note holds the expression's lines: %q", n)
		}
	}
	t.Logf("event: %s", found[0])
}

// notes are the notes of every Event in ns.
func notes(t *testing.T, r *rig, ns string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := r.env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(list.Items))
	for _, e := range list.Items {
		out = append(out, e.Note)
	}
	return out
}
