// Package limiterspec turns a published snapshot entry into what the limiter runs: the one
// place the document meets the runtime. Every sidecar compiles the entries it receives with
// it, and the controller and the webhook compile the entries they publish with it, so what
// was checked is what runs. The snapshot package itself knows nothing of the limiter.
package limiterspec

import (
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Of is the limiter's Spec of entry e of namespace: durations from milliseconds, a missing
// replay bound (a document written before the field) as the limiter's default.
func Of(namespace string, e snapshot.Entry) limiter.Spec {
	c := limiter.Spec{
		Namespace: namespace, Name: e.Name, Algorithm: limiter.Algorithm(e.Algorithm),
		StateKey: e.StateKey, IdempotencyKey: e.IdempotencyKey, TTL: ms(e.TTLMs),
		FailureMode: limiter.FailureMode(e.FailureMode), Leases: e.Leases, Shards: int(e.Shards),
		// A caller of a policy with tiers or overrides may meet another rate on its next
		// request: its state records the rate it was written at, so it keeps its usage.
		KeepUsage: len(e.Tiers) > 0 || len(e.Overrides) > 0,
	}
	c.Limits = limits(e.Limits)
	if id := e.Idempotency; id != nil {
		c.IdempotencyTTL = ms(id.TTLMs)
		c.IdempotencyMaxReplays = limiter.DefaultMaxReplays
		if id.MaxReplays != 0 {
			c.IdempotencyMaxReplays = int(id.MaxReplays)
		}
	}
	if cc := e.Concurrency; cc != nil {
		c.Concurrency = &limiter.Concurrency{Max: cc.Max, SlotTTL: ms(cc.SlotTTLMs)}
	}
	if st := e.Cost.Settle; st != nil {
		c.Settle = limiter.DefaultSettle
		if st.TimeoutMs != 0 {
			c.Settle = ms(st.TimeoutMs)
		}
	}
	if lc := e.LocalCap; lc != nil {
		c.LocalCap = &limiter.LocalCapConfig{Requests: lc.Requests, Period: ms(lc.PeriodMs), MaxIdentities: int(lc.MaxIdentities)}
	}
	return c
}

// OfTier is Of for tier i of entry e (e.Tiers[i]): the same policy with the tier's limits.
// Tiers share the policy's state keys, so a limit of one name counts in one state whatever
// the tier.
func OfTier(namespace string, e snapshot.Entry, i int) limiter.Spec {
	return OfLimits(namespace, e, e.Tiers[i].Limits)
}

// OfLimits is Of for entry e with limits ls in place of its own: a tier's, or an
// override's.
func OfLimits(namespace string, e snapshot.Entry, ls []snapshot.Limit) limiter.Spec {
	c := Of(namespace, e)
	c.Limits = limits(ls)
	return c
}

// Horizon is the longest horizon of entry e's tiers, the default tier's included: the
// shortest TTL that keeps every tier's state while it still counts.
func Horizon(namespace string, e snapshot.Entry) time.Duration {
	c := Of(namespace, e)
	h := limiter.Horizon(c.Algorithm, c.Limits)
	for i := range e.Tiers {
		t := OfTier(namespace, e, i)
		h = max(h, limiter.Horizon(t.Algorithm, t.Limits))
	}
	return h
}

// CompileLimits is the limiter's policy of entry e with limits ls in place of its own (see
// Compile and OfLimits).
func CompileLimits(namespace string, e snapshot.Entry, ls []snapshot.Limit, functions bool) (*limiter.Policy, error) {
	c := OfLimits(namespace, e, ls)
	c.Functions = functions
	return limiter.NewPolicy(c)
}

// limits are ls in the limiter's terms; a calendar limit's Period is its unit's nominal
// length, whatever the document says.
func limits(ls []snapshot.Limit) []limiter.Limit {
	out := make([]limiter.Limit, 0, len(ls))
	for _, l := range ls {
		lim := limiter.Limit{Name: l.Name, Requests: l.Requests, Period: ms(l.PeriodMs), Burst: l.Burst}
		if l.Calendar != nil {
			lim.Calendar = calendarOf(*l.Calendar)
			lim.Period = lim.Calendar.Unit.Nominal()
		}
		out = append(out, lim)
	}
	return out
}

// calendarOf is c with its time zone loaded. A unit or zone this build does not know (an
// older time zone database than the manager's) gives a Calendar without a Location, which
// the limiter refuses, so the policy is refused rather than run in another zone.
func calendarOf(c snapshot.Calendar) *calendar.Calendar {
	cal, err := calendar.New(calendar.Unit(c.Unit), c.TimeZone)
	if err != nil {
		return &calendar.Calendar{Unit: calendar.Unit(c.Unit)}
	}
	return &cal
}

// Validate says what is wrong with entry e of namespace as the limiter runs it
// (limiter.Validate), building nothing.
func Validate(namespace string, e snapshot.Entry) limiter.FieldErrors {
	return limiter.Validate(Of(namespace, e))
}

// Compile is the limiter's policy of entry e of namespace; functions calls its scripts as
// the Redis functions the manager loaded (snapshot.Redis.Functions).
func Compile(namespace string, e snapshot.Entry, functions bool) (*limiter.Policy, error) {
	c := Of(namespace, e)
	c.Functions = functions
	return limiter.NewPolicy(c)
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
