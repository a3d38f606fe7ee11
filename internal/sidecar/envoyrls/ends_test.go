package envoyrls_test

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// llmEnvoyPolicy is a budget of 1000 tokens a year (a fixed window no test run crosses) per
// "user" entry on route=llm, each
// call reserving 100 (default; up to 500 by hits_addend), settled from the response, with
// at most 2 calls of one user in flight.
func llmEnvoyPolicy() *v1alpha1.RateLimitPolicy {
	return sidecartest.EnvoyPolicy("llm", "llm", 1000, 8760*time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Algorithm = v1alpha1.AlgorithmFixedWindow
		most := int64(500)
		s.Cost = &v1alpha1.Cost{Default: 100, Max: &most, Settle: &v1alpha1.CostSettle{Header: "x-usage-tokens"}}
		s.Concurrency = &v1alpha1.Concurrency{Max: 2, SlotTTL: &metav1.Duration{Duration: time.Minute}}
	})
}

// streamStart is the call Envoy makes when request id's stream starts.
func streamStart(id string) *rlsv3.RateLimitRequest {
	return envoyReq(0, envoyDesc("route", "llm", "user", "alice", envoyrls.RequestIDKey, id))
}

// streamEnd is the call Envoy makes when request id's stream ends (apply_on_stream_done),
// stating the cost tokens (negative: none stated).
func streamEnd(id string, tokens int) *rlsv3.RateLimitRequest {
	d := envoyDesc("route", "llm", "user", "alice", envoyrls.RequestIDKey, id, envoyrls.StreamDoneKey, "1")
	if tokens >= 0 {
		d.HitsAddend = wrapperspb.UInt64(uint64(tokens))
	}
	return envoyReq(0, d)
}

// remainingOf is what the stream-start call's status reports remaining, its own
// reservation out (the tightest limit: tokens, or in-flight when fewer are left).
func remainingOf(resp *rlsv3.RateLimitResponse) uint32 {
	return resp.GetStatuses()[0].GetLimitRemaining()
}

// TestEnvoyStreamEndSettlesAndReleases: the stream-start call reserves 100 tokens and takes
// one of 2 slots; the stream-end call stating 30 gives 70 back and frees the slot (debiting
// nothing and answering OK, whatever the cost's size), one stating 700 charges 600, one
// stating none keeps the reservation; a third stream in flight is refused until one ends;
// a stream-end call for an unknown request id changes nothing.
func TestEnvoyStreamEndSettlesAndReleases(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, llmEnvoyPolicy())
	if r := h.envoyCall(t, streamStart("r1")); r.GetOverallCode() != codeOK || remainingOf(r) != 1 {
		t.Fatalf("stream r1 starts: %v", r)
	}
	h.envoyCall(t, streamEnd("r1", 30))
	if r := h.envoyCall(t, streamStart("r2")); r.GetOverallCode() != codeOK || remainingOf(r) != 1 {
		t.Fatalf("stream r2 starts after r1 ended: %v, want 1 slot left (r1's freed)", r)
	}
	if r := h.envoyCall(t, streamStart("r3")); r.GetOverallCode() != codeOK {
		t.Fatalf("stream r3 starts: %v", r)
	}
	if r := h.envoyCall(t, streamStart("r4")); r.GetOverallCode() != overLimit {
		t.Fatalf("a third stream in flight: %v, want OVER_LIMIT", r)
	}
	if r := h.envoyCall(t, streamEnd("r2", 700)); r.GetOverallCode() != codeOK {
		t.Fatalf("stream r2 ends at 700 tokens (beyond cost.max): %v, want OK", r)
	}
	h.envoyCall(t, streamEnd("r3", -1))
	h.envoyCall(t, streamEnd("nobody", 5))
	// Used: r1 30, r2 700, r3 100 (none stated), r4 nothing (refused a slot) = 830.
	if r := h.envoyCall(t, streamStart("r5")); r.GetOverallCode() != codeOK || remainingOf(r) != 1 {
		t.Fatalf("stream r5: %v, want admitted with 1 slot left", r)
	}
	if r := h.envoyCall(t, envoyReq(0, envoyDesc("route", "llm", "user", "alice", envoyrls.RequestIDKey, "r6"))); r.GetOverallCode() != overLimit {
		t.Fatalf("stream r6 with 830 + 100 reserved of 1000 used: %v, want OVER_LIMIT (70 left)", r)
	}
	h.envoyCall(t, streamEnd("r5", 0))
	if got := sidecartest.MetricValue(t, h.reg, "ratelimit_sidecar_settlements_total",
		map[string]string{"front": envoyrls.FrontName, "policy": "llm", "result": "unstated"}); got != 1 {
		t.Fatalf("%v settlements unstated, want 1 (r3)", got)
	}
	if r := h.envoyCall(t, envoyReq(80, envoyDesc("route", "llm", "user", "alice", envoyrls.RequestIDKey, "r7"))); r.GetOverallCode() != codeOK {
		t.Fatalf("stream r7 reserving 80 after r5 settled at 0 (170 left): %v", r)
	}
}

// TestEnvoyDeniedRequestEndsItsReservations: a request one descriptor admits (reserving 300
// and a slot of llm) while another is over its limit never reaches the upstream: the
// admission is ended at once, its tokens given back and its slot freed.
func TestEnvoyDeniedRequestEndsItsReservations(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, llmEnvoyPolicy(), sidecartest.EnvoyPolicy("tight", "tight", 1, time.Hour))
	tight := envoyDesc("route", "tight", "user", "alice")
	h.envoyCall(t, envoyReq(0, tight))
	for i := range 3 {
		llm := envoyDesc("route", "llm", "user", "alice", envoyrls.RequestIDKey, "denied")
		llm.HitsAddend = wrapperspb.UInt64(300)
		if r := h.envoyCall(t, envoyReq(0, llm, tight)); r.GetOverallCode() != overLimit {
			t.Fatalf("request %d over tight's limit: %v", i, r)
		}
	}
	// Had the three llm admissions kept their slots, a stream now would be refused; had they
	// kept their tokens (3 × 300), 100 would be left.
	if r := h.envoyCall(t, envoyReq(500, envoyDesc("route", "llm", "user", "alice", envoyrls.RequestIDKey, "next"))); r.GetOverallCode() != codeOK ||
		r.GetStatuses()[0].GetLimitRemaining() != 1 {
		t.Fatalf("a stream reserving 500 after three denied requests: %v, want admitted with 1 slot left", r)
	}
}

// TestEnvoyStreamsSharingARequestID: two streams under one x-request-id (a client may choose
// it), each costing 700 on a reservation of 100: both ends are settled, each charging 600.
// Before, the second start replaced the first's admission and the first's overrun was never
// charged.
func TestEnvoyStreamsSharingARequestID(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, llmEnvoyPolicy())
	h.envoyCall(t, streamStart("same"))
	h.envoyCall(t, streamStart("same"))
	h.envoyCall(t, streamEnd("same", 700))
	h.envoyCall(t, streamEnd("same", 700))
	// 1400 used of 1000: nothing more, even a reservation of 1.
	if r := h.envoyCall(t, envoyReq(1, envoyDesc("route", "llm", "user", "alice", envoyrls.RequestIDKey, "next"))); r.GetOverallCode() != overLimit {
		t.Fatalf("after two streams of 700 tokens on a budget of 1000: %v, want OVER_LIMIT", r)
	}
}

// TestEnvoyStreamEndWithAndWithoutCost: a stream-end call carrying two descriptors, one
// without a cost (the fallback that frees the slot when the response states none) listed
// first, and one stating 30: the stated one settles (70 given back), whatever the order.
func TestEnvoyStreamEndWithAndWithoutCost(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, llmEnvoyPolicy())
	h.envoyCall(t, streamStart("r1"))
	end := streamEnd("r1", 30)
	end.Descriptors = append([]*ratelimitv3.RateLimitDescriptor{streamEnd("r1", -1).Descriptors[0]}, end.Descriptors...)
	h.envoyCall(t, end)
	// 30 used: reservations of 500 and 470 fit (with 100 kept, as an unstated end would
	// leave it, the second would not).
	for _, hits := range []uint32{500, 470} {
		if r := h.envoyCall(t, envoyReq(hits, envoyDesc("route", "llm", "user", "alice"))); r.GetOverallCode() != codeOK {
			t.Fatalf("a reservation of %d after a stream that used 30: %v", hits, r)
		}
	}
}
