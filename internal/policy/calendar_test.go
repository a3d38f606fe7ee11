package policy_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// calendarLimit is requests per calendar unit in zone ("" leaves the zone unset).
func calendarLimit(name string, requests int64, unit v1alpha1.CalendarUnit, zone string) v1alpha1.Limit {
	return v1alpha1.Limit{Name: name, Requests: requests, Calendar: &v1alpha1.CalendarPeriod{Unit: unit, TimeZone: zone}}
}

// monthly makes p a FixedWindow policy of 3 per calendar month in Berlin and 10 per second.
func monthly(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
	p.Spec.Limits = []v1alpha1.Limit{calendarLimit("monthly", 3, v1alpha1.CalendarMonth, "Europe/Berlin"),
		limit("per-second", 10, time.Second, 0)}
}

// withCalendarTier adds to monthly(p) a tier pro with limits.
func withCalendarTier(limits ...v1alpha1.Limit) func(*v1alpha1.RateLimitPolicy) {
	return func(p *v1alpha1.RateLimitPolicy) {
		monthly(p)
		withTier(`headers["x-plan"] == "pro"`, limits...)(p)
	}
}

// Calendar limits compile in spec.limits and in tiers, a zone left out is published as UTC,
// and the published period is the unit's nominal length.
func TestCalendarAccepted(t *testing.T) {
	p := base()
	withCalendarTier(calendarLimit("daily", 100, v1alpha1.CalendarDay, ""), calendarLimit("monthly", 50, v1alpha1.CalendarMonth, "Europe/Berlin"))(p)
	p.Spec.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOn} // leases serve calendar windows too
	c, errs := (policy.Rules{}).Compile(p)
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs.ToAggregate())
	}
	got := c.Entry.Limits[0]
	if got.Calendar == nil || *got.Calendar != (snapshot.Calendar{Unit: "Month", TimeZone: "Europe/Berlin"}) ||
		got.PeriodMs != (744*time.Hour).Milliseconds() {
		t.Errorf("published %+v (calendar %+v), want Month in Europe/Berlin with periodMs of 744h", got, got.Calendar)
	}
	if c.Entry.Limits[1].Calendar != nil || c.Entry.Limits[1].PeriodMs != 1000 {
		t.Errorf("the period limit was published as %+v", c.Entry.Limits[1])
	}
	daily := c.Entry.Tiers[0].Limits[0]
	if daily.Calendar == nil || *daily.Calendar != (snapshot.Calendar{Unit: "Day", TimeZone: "UTC"}) || daily.PeriodMs != 86_400_000 {
		t.Errorf("tier limit published as %+v (calendar %+v), want Day in UTC", daily, daily.Calendar)
	}
	run, err := limiterspec.Compile(p.Namespace, c.Entry, false)
	if err != nil {
		t.Fatal(err)
	}
	lc := run.Limits[0].Calendar
	if lc == nil || lc.Unit != calendar.Month || lc.Location == nil || lc.Location.String() != "Europe/Berlin" {
		t.Errorf("the limiter runs calendar %+v, want Month in Europe/Berlin", lc)
	}
}

// A calendar limit does not need a TTL as long as its window: the limiter keeps each key
// until its window's end, so the policy's TTL only has to cover its period limits.
func TestCalendarShortTTLAccepted(t *testing.T) {
	p := base()
	monthly(p)
	layout(p, "", "", time.Hour)
	(policy.Rules{}).Default(p)
	compileOK(t, p)
}

// Every calendar the limiter cannot run is refused naming its field.
func TestCalendarRefused(t *testing.T) {
	for _, tc := range []rejectCase{
		{name: "calendar under TokenBucket", mutate: func(p *v1alpha1.RateLimitPolicy) {
			monthly(p)
			p.Spec.Algorithm = v1alpha1.AlgorithmTokenBucket
		}, field: "spec.limits[0].calendar", msgs: []string{"calendar windows are for FixedWindow", "TokenBucket"}},
		{name: "tier calendar under SlidingWindow", mutate: func(p *v1alpha1.RateLimitPolicy) {
			sliding(p)
			withTier(`true`, calendarLimit("daily", 5, v1alpha1.CalendarDay, ""))(p)
		}, field: "spec.tiers[0].limits[0].calendar", msgs: []string{"calendar windows are for FixedWindow", "SlidingWindow"}},
		{name: "unknown time zone", mutate: func(p *v1alpha1.RateLimitPolicy) {
			monthly(p)
			p.Spec.Limits[0].Calendar.TimeZone = "Mars/Olympus_Mons"
		}, field: "spec.limits[0].calendar.timeZone", msgs: []string{`unknown time zone "Mars/Olympus_Mons"`}},
		{name: "Local time zone in a second tier", mutate: func(p *v1alpha1.RateLimitPolicy) {
			withCalendarTier(limit("per-second", 50, time.Second, 0))(p)
			p.Spec.Tiers = append(p.Spec.Tiers, v1alpha1.Tier{Name: "local", When: "true",
				Limits: []v1alpha1.Limit{calendarLimit("weekly", 9, v1alpha1.CalendarWeek, "Local")}})
		}, field: "spec.tiers[1].limits[0].calendar.timeZone", msgs: []string{`"Local" names the machine's zone`}},
		{name: "unknown unit", raw: true, mutate: func(p *v1alpha1.RateLimitPolicy) {
			monthly(p)
			p.Spec.Limits[0].Calendar.Unit = "Fortnight"
			layout(p, defaultState, "", 744*time.Hour)
		}, field: "spec.limits[0].calendar.unit", msgs: []string{`"Fortnight"`, `"Month"`}},
		{name: "period and calendar", mutate: func(p *v1alpha1.RateLimitPolicy) {
			monthly(p)
			p.Spec.Limits[0].Period = metav1.Duration{Duration: time.Hour}
		}, field: "spec.limits[0].calendar", msgs: []string{"set exactly one of period and calendar"}},
		{name: "tier gives the name another zone", mutate: withCalendarTier(calendarLimit("monthly", 50, v1alpha1.CalendarMonth, "UTC")),
			field: "spec.tiers[0].limits[0].calendar", msgs: []string{`limit "monthly" has calendar Month in Europe/Berlin in spec.limits[0]`}},
		{name: "tier gives the name another unit", mutate: withCalendarTier(calendarLimit("monthly", 50, v1alpha1.CalendarWeek, "Europe/Berlin")),
			field: "spec.tiers[0].limits[0].calendar", msgs: []string{`limit "monthly" has calendar Month in Europe/Berlin`}},
		{name: "tier gives the name a period", mutate: withCalendarTier(limit("monthly", 50, 744*time.Hour, 0)),
			field: "spec.tiers[0].limits[0].period", msgs: []string{`limit "monthly" has calendar Month in Europe/Berlin`}},
		{name: "tier gives a period's name a calendar", mutate: withCalendarTier(calendarLimit("per-second", 50, v1alpha1.CalendarDay, "")),
			field: "spec.tiers[0].limits[0].calendar", msgs: []string{`limit "per-second" has period 1s in spec.limits[1]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mutate(p)
			if !tc.raw {
				(policy.Rules{}).Default(p)
			}
			_, errs := (policy.Rules{}).CompileAsIs(p)
			assertErrors(t, errs, tc.field, tc.msgs, tc.also...)
		})
	}
}

// calendarEntry is monthly(base()) as published.
func calendarEntry(t *testing.T) snapshot.Entry {
	t.Helper()
	p := base()
	monthly(p)
	c, errs := (policy.Rules{}).Compile(p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return c.Entry
}

// An override may give its callers a calendar limit of the policy's unit and zone; every
// calendar the policy cannot run is refused naming the override's field.
func TestOverrideCalendar(t *testing.T) {
	give := func(ls ...v1alpha1.Limit) *v1alpha1.RateLimitOverride {
		return overrideOf(func(s *v1alpha1.RateLimitOverrideSpec) { s.Tier, s.Limits = "", ls })
	}
	got, errs := policy.Override(calendarEntry(t), baseNamespace, give(calendarLimit("monthly", 300, v1alpha1.CalendarMonth, "Europe/Berlin")))
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs.ToAggregate())
	}
	if c := got.Limits[0].Calendar; c == nil || *c != (snapshot.Calendar{Unit: "Month", TimeZone: "Europe/Berlin"}) {
		t.Errorf("override published calendar %+v", c)
	}
	for _, tc := range []struct {
		name  string
		entry func(*testing.T) snapshot.Entry
		limit v1alpha1.Limit
		field string
		msgs  []string
	}{
		{"another zone than the policy's", calendarEntry, calendarLimit("monthly", 300, v1alpha1.CalendarMonth, ""),
			"spec.limits[0].calendar", []string{`limit "monthly" has calendar Month in Europe/Berlin in the policy's spec.limits[0]`}},
		{"a TokenBucket policy", tieredEntry, calendarLimit("daily", 300, v1alpha1.CalendarDay, ""),
			"spec.limits[0].calendar", []string{"calendar windows are for FixedWindow", "TokenBucket"}},
		{"an unknown zone", calendarEntry, calendarLimit("daily", 300, v1alpha1.CalendarDay, "Europe/Atlantis"),
			"spec.limits[0].calendar.timeZone", []string{`unknown time zone "Europe/Atlantis"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := policy.Override(tc.entry(t), baseNamespace, give(tc.limit))
			found := false
			for _, err := range errs {
				if err.Field == tc.field && containsAll(err.Error(), tc.msgs) {
					found = true
				}
			}
			if !found {
				t.Errorf("no error on %s containing %q; got %v", tc.field, tc.msgs, errs)
			}
		})
	}
}

// A calendar mistake the limiter also checks is reported once, in the policy's words.
func TestCalendarReportedOnce(t *testing.T) {
	p := base()
	withCalendarTier(calendarLimit("daily", 5, v1alpha1.CalendarDay, "Europe/Atlantis"))(p)
	p.Spec.Algorithm = v1alpha1.AlgorithmTokenBucket
	(policy.Rules{}).Default(p)
	_, errs := (policy.Rules{}).CompileAsIs(p)
	want := map[string]int{"spec.limits[0].calendar": 1, "spec.tiers[0].limits[0].calendar": 1, "spec.tiers[0].limits[0].calendar.timeZone": 1}
	got := map[string]int{}
	for _, e := range errs {
		got[e.Field]++
	}
	for f, n := range want {
		if got[f] != n {
			t.Errorf("%d errors on %s, want %d; got:\n%s", got[f], f, n, list(errs))
		}
	}
}
