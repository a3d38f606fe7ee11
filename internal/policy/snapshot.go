package policy

import (
	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Entry is the snapshot entry of a defaulted policy: the one conversion from the API to what
// is published, durations in milliseconds (checkSpec refuses finer ones, so nothing is
// lost), omitted scalars given their defaults. Build compiles it; the sidecars compile it too.
func Entry(p *v1alpha1.RateLimitPolicy) snapshot.Entry {
	s := &p.Spec
	out := snapshot.Entry{
		Name: p.Name, Match: wireMatch(s.Match), Identity: wireIdentity(s.Identity), Algorithm: string(s.Algorithm),
		FailureMode: string(s.FailureMode), Shadow: s.Shadow, Cost: snapshot.Cost{Default: 1},
	}
	out.Leases, out.Shards = hotKeys(s.HotKeys)
	if c := s.Concurrency; c != nil {
		out.Concurrency = &snapshot.Concurrency{Max: c.Max, SlotTTLMs: DefaultSlotTTL.Milliseconds()}
		if c.SlotTTL != nil {
			out.Concurrency.SlotTTLMs = c.SlotTTL.Milliseconds()
		}
	}
	if out.FailureMode == "" {
		out.FailureMode = string(limiter.FailOpen)
	}
	if sc, err := limiter.ScriptFor(limiter.Algorithm(s.Algorithm)); err == nil {
		out.Script, out.SHA = sc.Name, sc.SHA
	}
	out.Limits = wireLimits(s.Limits)
	for _, t := range s.Tiers {
		out.Tiers = append(out.Tiers, snapshot.Tier{Name: t.Name, When: t.When, Limits: wireLimits(t.Limits)})
	}
	if kl := s.KeyLayout; kl != nil {
		out.StateKey = kl.State
		if kl.TTL != nil {
			out.TTLMs = kl.TTL.Milliseconds()
		}
		if s.Idempotency != nil {
			out.IdempotencyKey = kl.Idempotency
		}
	}
	if c := s.Cost; c != nil {
		out.Cost = wireCost(c)
	}
	if id := s.Idempotency; id != nil {
		out.Idempotency = &snapshot.Idempotency{Header: id.Header, DescriptorKey: id.DescriptorKey,
			TTLMs: id.TTL.Milliseconds(), MaxReplays: id.MaxReplays}
		if out.Idempotency.MaxReplays == 0 { // stored before the field existed
			out.Idempotency.MaxReplays = limiter.DefaultMaxReplays
		}
	}
	if lc := s.LocalCap; lc != nil {
		out.LocalCap = &snapshot.LocalCap{Requests: lc.Requests, PeriodMs: lc.Period.Milliseconds(),
			MaxIdentities: lc.MaxIdentities}
	}
	return out
}

// wireCost is c in the wire format: the settlement's timeout defaulted.
func wireCost(c *v1alpha1.Cost) snapshot.Cost {
	out := snapshot.Cost{Default: max(c.Default, 1), Header: c.Header}
	if c.Max != nil {
		out.Max = *c.Max
	}
	if st := c.Settle; st != nil {
		out.Settle = &snapshot.CostSettle{Header: st.Header, Field: st.Field, TimeoutMs: limiter.DefaultSettle.Milliseconds()}
		if st.Timeout != nil {
			out.Settle.TimeoutMs = st.Timeout.Milliseconds()
		}
	}
	return out
}

// wireLimits is ls in the wire format.
func wireLimits(ls []v1alpha1.Limit) []snapshot.Limit {
	out := make([]snapshot.Limit, 0, len(ls))
	for _, l := range ls {
		e := snapshot.Limit{Name: l.Name, Requests: l.Requests, PeriodMs: l.Period.Milliseconds()}
		if l.Burst != nil {
			e.Burst = *l.Burst
		}
		if c := l.Calendar; c != nil {
			e.Calendar = wireCalendar(c)
			e.PeriodMs = calendar.Unit(c.Unit).Nominal().Milliseconds()
		}
		out = append(out, e)
	}
	return out
}

// wireCalendar is c in the wire format, its time zone stated ("UTC" when omitted), so two
// ways of writing one zone publish the same limit.
func wireCalendar(c *v1alpha1.CalendarPeriod) *snapshot.Calendar {
	zone := c.TimeZone
	if zone == "" {
		zone = defaultTimeZone
	}
	return &snapshot.Calendar{Unit: string(c.Unit), TimeZone: zone}
}

// hotKeys is the snapshot's view of spec.hotKeys: leases on, and the shard count (0: one
// key).
func hotKeys(hk *v1alpha1.HotKeys) (leases bool, shards int32) {
	if hk == nil {
		return false, 0
	}
	if hk.Shards != nil && *hk.Shards > 1 {
		shards = *hk.Shards
	}
	return hk.Leases == v1alpha1.LeaseModeOn, shards
}
