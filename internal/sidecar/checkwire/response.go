package checkwire

import (
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// Response is the answer: HTTP 200 when allowed, 429 when denied.
type Response struct {
	// Policy is the policy checked.
	Policy string `json:"policy"`
	// Allowed is the final answer (shadow policies always allow).
	Allowed bool `json:"allowed"`
	// Result is allowed, denied, shadow_denied, skipped or rejected.
	Result string `json:"result"`
	// Limit names the reported limit: the tightest, or the denying one.
	Limit string `json:"limit,omitempty"`
	// Quota is that limit's size.
	Quota int64 `json:"quota"`
	// Remaining is what is left of it.
	Remaining int64 `json:"remaining"`
	// RetryAfterMs is how long to wait when denied; -1 means never.
	RetryAfterMs int64 `json:"retryAfterMs"`
	// ResetAfterMs is when the limit is full again.
	ResetAfterMs int64 `json:"resetAfterMs"`
	// Replayed is true when the request id had been seen: the first decision, no debit.
	Replayed bool `json:"replayed,omitempty"`
	// Source says who decided: Redis, DenyCache, FailOpen, FailClosed or LocalCap.
	Source string `json:"source,omitempty"`
	// SnapshotVersion is the snapshot the decision was made on.
	SnapshotVersion string `json:"snapshotVersion"`
	// Tier is the tier whose limits were checked.
	Tier string `json:"tier,omitempty"`
	// Peek is true for the answer to a peek: nothing was debited, and Remaining is what the
	// reported limit holds before the request.
	Peek bool `json:"peek,omitempty"`
	// Limits, for a peek Redis answered, is every limit of the tier: its quota, what the
	// identity has used and has left, when it is full again, and how long this request
	// would wait on it.
	Limits []usage.Limit `json:"limits,omitempty"`
	// Reserved, for an admission whose policy settles its cost from the response
	// (cost.settle), is the cost reserved: settle it with POST /v1/settle once the response
	// states its cost, or it stands.
	Reserved int64 `json:"reserved,omitempty"`
	// Reservation, with Reserved, is the id the reservation is recorded under in Redis: the
	// settlement names it, with the check's caller. Absent when Redis could not record it
	// (the reservation then stands, unsettled).
	Reservation string `json:"reservation,omitempty"`
	// Slot, for an admission of a policy with a concurrency limit, is the slot the request
	// holds: give it back with POST /v1/release when the request ends, or it comes back
	// after the policy's concurrency.slotTTL.
	Slot string `json:"slot,omitempty"`
}

// ResponseOf is the answer to a check decided as o on the snapshot version.
func ResponseOf(o *engine.Outcome, version string) Response {
	d := &o.Decision
	resp := Response{Policy: o.Rule.Name(), Allowed: o.Allowed, Result: o.Result(), Limit: d.LimitName,
		Quota: d.Limit, Remaining: d.Remaining, RetryAfterMs: d.RetryAfter.Milliseconds(),
		ResetAfterMs: d.ResetAfter.Milliseconds(), Replayed: d.Replayed, Source: string(d.Source), SnapshotVersion: version,
		Tier: o.Tier.Name}
	if d.RetryAfter < 0 {
		resp.RetryAfterMs = -1
	}
	if o.Peeked {
		resp.Peek, resp.Limits = true, UsageOf(o.State)
	}
	if o.Settles() {
		resp.Reserved, resp.Reservation = o.Reserved(), o.Reservation()
	}
	resp.Slot = o.Slot()
	return resp
}

// UsageOf is the wire form of a peek's limit states, in the policy's order.
func UsageOf(states []limiter.LimitState) []usage.Limit {
	out := make([]usage.Limit, len(states))
	for i, s := range states {
		out[i] = usage.Limit{Name: s.Name, Quota: s.Limit, Used: s.Used(), Remaining: s.Remaining,
			ResetAfterMs: ceilMs(s.ResetAfter), RetryAfterMs: ceilMs(s.RetryAfter)}
	}
	return out
}

// ceilMs is d in whole ms, rounded up; negative (never) is -1.
func ceilMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
