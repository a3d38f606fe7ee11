package limiter

import (
	"fmt"
	"testing"
	"time"
)

// A request id may only stand for the request it was first seen with, and only a bounded
// number of times: otherwise one Idempotency-Key is a free pass (50 requests under one id
// were all admitted by a 3-per-minute limit; one id on 12 different paths admitted 12).

// idemPolicy is a policy of requests per hour with idempotency replaying at most maxReplays.
func idemPolicy(t *testing.T, alg Algorithm, requests int64, maxReplays int) *Policy {
	t.Helper()
	policySeq++
	p, err := NewPolicy(Spec{Namespace: "test", Name: fmt.Sprintf("idem-%s-%d-%d", alg, policySeq, time.Now().UnixNano()),
		Algorithm: alg, Limits: []Limit{perHour("hourly", requests)}, StateKey: testTemplate,
		IdempotencyKey: testIdemTemplate, TTL: 2 * time.Hour, IdempotencyTTL: time.Minute,
		IdempotencyMaxReplays: maxReplays, FailureMode: FailOpen})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestIdempotencyKeyIsNoFreePass replays the reported attacks on every algorithm: one id
// sent 50 times, and one id on 12 different requests.
func TestIdempotencyKeyIsNoFreePass(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		p := idemPolicy(t, alg, 3, 3)
		admitted := 0
		for range 50 {
			if mustCheck(t, l, p, Request{Identity: "a", RequestID: "same", Fingerprint: "POST /pay"}).Allowed {
				admitted++
			}
		}
		// The first request, its 3 replays, then the 2 requests left of the limit.
		if admitted != 3+3 {
			t.Errorf("one id sent 50 times: %d admitted, want 6 (3 requests + 3 replays of the first)", admitted)
		}
		admitted = 0
		for i := range 12 {
			if mustCheck(t, l, p, Request{Identity: "b", RequestID: "same", Fingerprint: fmt.Sprintf("POST /path-%d", i)}).Allowed {
				admitted++
			}
		}
		if admitted != 3 {
			t.Errorf("one id on 12 different requests: %d admitted, want 3 (the limit)", admitted)
		}
	})
}

// TestIdempotencyReplayBoundAndBinding: the same request replays its first decision without a
// debit up to maxReplays times, then counts as new; another request under a seen id counts
// as new and leaves the first request's record alone; the identity is part of the binding.
func TestIdempotencyReplayBoundAndBinding(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		p := idemPolicy(t, alg, 10, 2)
		req := Request{Identity: "a", RequestID: "id-1", Fingerprint: "GET /x"}
		expect := func(what string, r Request, allowed, replayed bool, remaining int64) {
			t.Helper()
			d := mustCheck(t, l, p, r)
			if d.Allowed != allowed || d.Replayed != replayed || d.Remaining != remaining {
				t.Fatalf("%s: %+v, want allowed %v, replayed %v, %d left", what, d, allowed, replayed, remaining)
			}
		}
		expect("first", req, true, false, 9)
		expect("replay 1", req, true, true, 9)
		other := req
		other.Fingerprint = "GET /y"
		expect("another request under the seen id", other, true, false, 8)
		expect("replay 2 (the record is the first request's)", req, true, true, 9)
		expect("beyond maxReplays: a new request", req, true, false, 7)
		expect("still a new request", req, true, false, 6)
		thief := req
		thief.Identity = "b"
		expect("the same id and request from another identity", thief, true, false, 9)
	})
}

// TestIdempotencyKeyNotSharedAcrossPolicies: two policies whose idempotency templates name
// the same key (allowed within a namespace) must each debit: one's record never replays for
// the other.
func TestIdempotencyKeyNotSharedAcrossPolicies(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	mk := func(name string) *Policy {
		p, err := NewPolicy(Spec{Namespace: "shared", Name: name, Algorithm: GCRA,
			Limits: []Limit{perHour("hourly", 5)}, StateKey: "{rl:${namespace}:${identity}}:" + name + ":${limit}",
			IdempotencyKey: "{rl:${namespace}:${identity}}:idem:${requestId}", TTL: 2 * time.Hour,
			IdempotencyTTL: time.Minute, IdempotencyMaxReplays: 3, FailureMode: FailOpen})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mk("a"), mk("b")
	r := Request{Identity: "x", RequestID: "id", Fingerprint: "POST /pay"}
	if ka, kb := a.Keys("x", "id"), b.Keys("x", "id"); ka[1] != kb[1] {
		t.Fatalf("the test needs one idempotency key for both, got %q and %q", ka[1], kb[1])
	}
	if d := mustCheck(t, l, a, r); !d.Allowed || d.Replayed || d.Remaining != 4 {
		t.Fatalf("policy a: %+v, want admitted with 4 left", d)
	}
	if d := mustCheck(t, l, b, r); !d.Allowed || d.Replayed || d.Remaining != 4 {
		t.Fatalf("policy b under the same key: %+v, want its own debit (4 left), not a's replay", d)
	}
}
