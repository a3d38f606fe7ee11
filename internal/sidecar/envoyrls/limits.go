package envoyrls

import (
	"math"
	"math/bits"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// rateLimits are the limits of one Set's Envoy rules as RLS reports them (envoyRateLimit),
// built once per Set and shared read-only by every response (marshalling does not modify a
// message, so concurrent responses may hold the same one).
type rateLimits struct {
	set *engine.Set
	// byTier are each tier's reported limits, parallel to its Limits.
	byTier map[*engine.Tier][]*rlsv3.RateLimitResponse_RateLimit
}

// rateLimitsOf is the reported limits of set's rules. The Service keeps those of the snapshot
// in force; a new snapshot's are built on its first request, reusing those of the rules a
// reload kept (rules are immutable and reused when unchanged). A request still on an older
// Set gets its limits built for it alone, so it cannot evict the current ones.
func (s *Service) rateLimitsOf(set *engine.Set) *rateLimits {
	prev := s.limits.Load()
	if prev != nil && prev.set == set {
		return prev
	}
	next := &rateLimits{set: set, byTier: make(map[*engine.Tier][]*rlsv3.RateLimitResponse_RateLimit, len(set.Rules))}
	for _, r := range set.Rules {
		if r.Entry.Match.Envoy == nil {
			continue
		}
		for _, t := range r.AllTiers() {
			ls, ok := prev.reported(t)
			if !ok {
				for i := range t.Limits {
					ls = append(ls, envoyRateLimit(r.Name(), &t.Limits[i]))
				}
			}
			next.byTier[t] = ls
		}
	}
	if set == s.Engine.Store.Current() {
		s.limits.Store(next)
	}
	return next
}

// reported is tier t's reported limits when c (possibly nil) holds them.
func (c *rateLimits) reported(t *engine.Tier) ([]*rlsv3.RateLimitResponse_RateLimit, bool) {
	if c == nil {
		return nil, false
	}
	ls, ok := c.byTier[t]
	return ls, ok
}

// of is tier t's limit named name as Envoy RLS reports it, or nil.
func (c *rateLimits) of(t *engine.Tier, name string) *rlsv3.RateLimitResponse_RateLimit {
	ls, ok := c.reported(t)
	if name == "" || !ok {
		return nil
	}
	for i := range t.Limits {
		if t.Limits[i].Name == name {
			return ls[i]
		}
	}
	return nil
}

// envoyUnit is an RLS time unit and its length in milliseconds.
type envoyUnit struct {
	unit rlsv3.RateLimitResponse_RateLimit_Unit
	ms   int64
}

// envoyUnits are the units a limit is reported in, largest first.
var envoyUnits = []envoyUnit{
	{rlsv3.RateLimitResponse_RateLimit_DAY, 24 * 3600 * 1000},
	{rlsv3.RateLimitResponse_RateLimit_HOUR, 3600 * 1000},
	{rlsv3.RateLimitResponse_RateLimit_MINUTE, 60 * 1000},
	{rlsv3.RateLimitResponse_RateLimit_SECOND, 1000},
}

// calendarUnits are the RLS units of calendar windows.
var calendarUnits = map[string]rlsv3.RateLimitResponse_RateLimit_Unit{
	"Day": rlsv3.RateLimitResponse_RateLimit_DAY, "Week": rlsv3.RateLimitResponse_RateLimit_WEEK,
	"Month": rlsv3.RateLimitResponse_RateLimit_MONTH,
}

// envoyRateLimit reports limit l of policy as an RLS RateLimit named "<policy>/<limit>".
//
// A calendar limit is reported in its unit (DAY, WEEK, MONTH), exactly. Other RLS units are
// fixed (SECOND, MINUTE, HOUR, DAY) while a policy's period is any duration,
// so this is an approximation: the unit is the largest one not longer than the period
// (SECOND for periods under a second) and requests_per_unit is floor(size * unit / period),
// at least 1, where size is the limit's burst when set, else its requests (the same quota
// the RateLimit-Policy header reports). 10 per 90s is thus reported as 6 per MINUTE, and
// 5 per 500ms as 10 per SECOND. The limit itself is enforced exactly; only this report is
// rounded.
func envoyRateLimit(policy string, l *snapshot.Limit) *rlsv3.RateLimitResponse_RateLimit {
	size := l.Burst
	if size <= 0 {
		size = l.Requests
	}
	if unit, ok := calendarUnits[l.Calendar.GetUnit()]; ok {
		// A calendar limit is exactly requests per calendar day, week or month.
		return &rlsv3.RateLimitResponse_RateLimit{Name: policy + "/" + l.Name,
			RequestsPerUnit: uint32(min(size, math.MaxUint32)), Unit: unit} //nolint:gosec // clamped
	}
	u := envoyUnits[len(envoyUnits)-1]
	for _, c := range envoyUnits {
		if c.ms <= l.PeriodMs {
			u = c
			break
		}
	}
	return &rlsv3.RateLimitResponse_RateLimit{
		Name:            policy + "/" + l.Name,
		RequestsPerUnit: perUnit(size, u.ms, l.PeriodMs),
		Unit:            u.unit,
	}
}

// perUnit is floor(size * unitMs / periodMs) clamped to [1, MaxUint32], computed without
// overflow.
func perUnit(size, unitMs, periodMs int64) uint32 {
	if size <= 0 || periodMs <= 0 {
		return 1
	}
	hi, lo := bits.Mul64(uint64(size), uint64(unitMs)) //nolint:gosec // both positive
	// hi >= periodMs: the quotient does not fit in 64 bits.
	if hi >= uint64(periodMs) {
		return math.MaxUint32
	}
	q, _ := bits.Div64(hi, lo, uint64(periodMs))
	return uint32(min(max(q, 1), math.MaxUint32))
}
