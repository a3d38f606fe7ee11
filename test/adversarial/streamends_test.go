package adversarial

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
)

// Issue 39, item 3: Envoy's stream-end call (apply_on_stream_done) settles the admission
// remembered under its x-request-id, a header the client chooses. Remembered by request id
// and policy only, a stream's end settled whichever caller's admission came first under
// that id: mallory, sending alice's request id, had her 900 tokens charged to alice.

const envoyDomain = "llm-gateway"

// envoyBudget is a budget of 1000 tokens a year per "user" descriptor entry on route=llm,
// each stream reserving 100 (its hits_addend up to 500), settled at the stream's end.
func envoyBudget() *v1alpha1.RateLimitPolicy {
	return newPolicy("llm", v1alpha1.AlgorithmFixedWindow, 1000, 8760*time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match = v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: envoyDomain,
			Descriptors: []v1alpha1.DescriptorMatch{{Key: "route", Value: "llm"}}}}
		s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "user"}}}
		most := int64(500)
		s.Cost = &v1alpha1.Cost{Default: 100, Max: &most, Settle: &v1alpha1.CostSettle{Header: "x-usage-tokens"}}
	})
}

// stream is the descriptor of user's stream under request id; done marks the stream-end
// call, stating tokens.
func stream(user, id string, done bool, tokens uint64) *rlsv3.RateLimitRequest {
	d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
		{Key: "route", Value: "llm"}, {Key: "user", Value: user}, {Key: envoyrls.RequestIDKey, Value: id}}}
	if done {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: envoyrls.StreamDoneKey, Value: "1"})
		d.HitsAddend = wrapperspb.UInt64(tokens)
	}
	return &rlsv3.RateLimitRequest{Domain: envoyDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
}

// envoyCall sends req to the rig's Envoy RLS service.
func (r *rig) envoyCall(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := r.envoy.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// tokensLeft is what user has left of the 1000: a peek through the check API.
func (r *rig) tokensLeft(t *testing.T, user string) int64 {
	t.Helper()
	out := map[string]any{}
	r.postJSON(t, "/v1/check", map[string]any{"policy": "llm", "identity": user, "peek": true}, &out)
	rem, ok := out["remaining"].(float64)
	if !ok {
		t.Fatalf("peek of %s: %v", user, out)
	}
	return int64(rem)
}

// TestStreamEndSettlesOnlyItsOwnCaller: alice and mallory stream under one request id
// (mallory copies alice's x-request-id). Mallory's stream ends first, at 900 tokens;
// alice's at 10. Alice must be left 990 and mallory 100; issue 39 measured alice 100 and
// mallory 990 (mallory's cost charged to alice, alice's reservation settled by mallory's
// end).
func TestStreamEndSettlesOnlyItsOwnCaller(t *testing.T) {
	r := newRig(t, limiter.Options{}, envoyBudget())
	for _, user := range []string{"alice", "mallory"} {
		if resp := r.envoyCall(t, stream(user, "shared-id", false, 0)); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("%s's stream starts: %v", user, resp)
		}
	}
	r.envoyCall(t, stream("mallory", "shared-id", true, 900))
	r.envoyCall(t, stream("alice", "shared-id", true, 10))
	if a, m := r.tokensLeft(t, "alice"), r.tokensLeft(t, "mallory"); a != 990 || m != 100 {
		t.Fatalf("alice has %d left, mallory %d: want 990 and 100", a, m)
	}
}

// TestStreamEndOfAnotherCallerSettlesNothing: mallory sends a stream-end call under alice's
// request id, naming herself, without ever starting a stream: alice's admission stays
// reserved for alice's own end (which then settles it), and mallory is charged nothing.
func TestStreamEndOfAnotherCallerSettlesNothing(t *testing.T) {
	r := newRig(t, limiter.Options{}, envoyBudget())
	r.envoyCall(t, stream("alice", "alice-1", false, 0))
	r.envoyCall(t, stream("mallory", "alice-1", true, 0)) // "give alice's 100 back"
	if a := r.tokensLeft(t, "alice"); a != 900 {
		t.Fatalf("alice has %d left after mallory's forged end, want 900 (her 100 still reserved)", a)
	}
	r.envoyCall(t, stream("alice", "alice-1", true, 30))
	if a, m := r.tokensLeft(t, "alice"), r.tokensLeft(t, "mallory"); a != 970 || m != 1000 {
		t.Fatalf("alice has %d left, mallory %d: want 970 and 1000", a, m)
	}
}
