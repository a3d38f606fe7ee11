package policy

import (
	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Snapshot is the compiled, sidecar-facing form of a defaulted policy that Compile accepted.
func Snapshot(p *v1alpha1.RateLimitPolicy, compiled *limiter.Policy) snapshot.Policy {
	s := &p.Spec
	c := compiled.PolicyConfig
	out := snapshot.Policy{
		Name: p.Name, Match: s.Match, Identity: s.Identity,
		Algorithm: string(c.Algorithm), Script: compiled.Script().Name, SHA: compiled.Script().SHA,
		StateKey: c.StateKey, IdempotencyKey: c.IdempotencyKey, TTLMs: c.TTL.Milliseconds(),
		FailureMode: string(c.FailureMode), Shadow: s.Shadow,
		Cost: snapshot.Cost{Default: 1},
	}
	for _, l := range c.Limits {
		out.Limits = append(out.Limits, snapshot.Limit{Name: l.Name, Requests: l.Requests,
			PeriodMs: l.Period.Milliseconds(), Burst: l.Burst})
	}
	if s.Cost != nil {
		out.Cost = snapshot.Cost{Default: max(s.Cost.Default, 1), Header: s.Cost.Header}
		if s.Cost.Max != nil {
			out.Cost.Max = *s.Cost.Max
		}
	}
	if s.Idempotency != nil {
		out.Idempotency = &snapshot.Idempotency{Header: s.Idempotency.Header,
			DescriptorKey: s.Idempotency.DescriptorKey, TTLMs: c.IdempotencyTTL.Milliseconds(),
			MaxReplays: int32(c.IdempotencyMaxReplays)} //nolint:gosec // bounded by NewPolicy (<= 1000)
	}
	if lc := c.LocalCap; lc != nil {
		out.LocalCap = &snapshot.LocalCap{Requests: lc.Requests, PeriodMs: lc.Period.Milliseconds(),
			MaxIdentities: int32(lc.MaxIdentities)} //nolint:gosec // bounded by the API (<= 1e6)
	}
	return out
}
