package api

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// monthlyLimit is 3 per calendar month in Europe/Berlin, as a manifest writes it.
func monthlyLimit() map[string]any {
	return map[string]any{"name": "monthly", "requests": 3, "calendar": map[string]any{"unit": "Month", "timeZone": "Europe/Berlin"}}
}

// calendarPolicy is the base policy as FixedWindow with a calendar limit (3 per month in
// Berlin) beside a period limit (10 per second), and a tier pro of 100 per calendar day in
// the default zone.
func calendarPolicy(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	obj := basePolicy(t)
	set(t, obj.Object, "spec.algorithm", "FixedWindow")
	set(t, obj.Object, "spec.limits", []any{monthlyLimit(), map[string]any{"name": "per-second", "requests": 10, "period": "1s"}})
	set(t, obj.Object, "spec.tiers", []any{map[string]any{"name": "pro", "when": "true",
		"limits": []any{map[string]any{"name": "daily", "requests": 100, "calendar": map[string]any{"unit": "Day"}}}}})
	return obj
}

var invalidCalendars = []invalidCase{
	{"period and calendar", setTo("spec.limits.0.period", "1h"),
		"spec.limits[0]", "set exactly one of period and calendar"},
	{"neither period nor calendar", setTo("spec.limits.0", map[string]any{"name": "monthly", "requests": 3}),
		"spec.limits[0]", "set exactly one of period and calendar"},
	{"a tier limit with period and calendar", setTo("spec.tiers.0.limits.0.period", "24h"),
		"spec.tiers[0].limits[0]", "set exactly one of period and calendar"},
	{"a tier limit with neither", setTo("spec.tiers.0.limits.0", map[string]any{"name": "daily", "requests": 100}),
		"spec.tiers[0].limits[0]", "set exactly one of period and calendar"},
	{"an unknown unit", setTo("spec.limits.0.calendar.unit", "Fortnight"),
		"spec.limits[0].calendar.unit", "Unsupported value"},
	{"no unit", setTo("spec.limits.0.calendar", map[string]any{"timeZone": "UTC"}),
		"spec.limits[0].calendar.unit", "Required value"},
	{"a time zone that is not a name", setTo("spec.limits.0.calendar.timeZone", "../etc/localtime"),
		"spec.limits[0].calendar.timeZone", "should match"},
	{"a time zone too long", setTo("spec.limits.0.calendar.timeZone", "Europe/"+strings.Repeat("x", 60)),
		"spec.limits[0].calendar.timeZone", "may not be more than 64"},
	{"period still checked beside a calendar limit", setTo("spec.limits.1.period", "9000h"),
		"spec.limits[1].period", "at most 8760h"},
}

// TestInvalidCalendarsRejected: the API server refuses a limit with both or neither of
// period and calendar (in spec.limits and in tiers), and a calendar the schema rules out.
func TestInvalidCalendarsRejected(t *testing.T) {
	rejectAll(t, "cal-", calendarPolicy, invalidCalendars, "policy")
}

// TestInvalidOverrideCalendarsRejected: an override's limits follow the same rule.
func TestInvalidOverrideCalendarsRejected(t *testing.T) {
	withLimit := func(l map[string]any) func(*testing.T, map[string]any) {
		return func(t *testing.T, o map[string]any) {
			del(t, o, "spec.tier")
			set(t, o, "spec.limits", []any{l})
		}
	}
	both := monthlyLimit()
	both["period"] = "1h"
	rejectAll(t, "ocal-", baseOverride, []invalidCase{
		{"a limit with period and calendar", withLimit(both), "spec.limits[0]", "set exactly one of period and calendar"},
		{"a limit with neither", withLimit(map[string]any{"name": "monthly", "requests": 3}), "spec.limits[0]", "set exactly one of period and calendar"},
	}, "override")
}

// TestCalendarStored: a calendar policy is stored without a period, its omitted time zone
// defaulted to UTC; an override may give calendar limits too.
func TestCalendarStored(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "cal-")
	obj := calendarPolicy(t)
	obj.SetNamespace(ns)
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("a valid calendar policy was refused: %v", err)
	}
	var got policyv1alpha1.RateLimitPolicy
	if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), &got); err != nil {
		t.Fatal(err)
	}
	m, d := got.Spec.Limits[0], got.Spec.Tiers[0].Limits[0]
	if m.Calendar == nil || *m.Calendar != (policyv1alpha1.CalendarPeriod{Unit: "Month", TimeZone: "Europe/Berlin"}) || m.Period.Duration != 0 {
		t.Errorf("stored limit %+v (calendar %+v)", m, m.Calendar)
	}
	if d.Calendar == nil || d.Calendar.TimeZone != "UTC" {
		t.Errorf("stored tier limit calendar %+v, want its time zone defaulted to UTC", d.Calendar)
	}
	o := baseOverride(t)
	o.SetNamespace(ns)
	del(t, o.Object, "spec.tier")
	set(t, o.Object, "spec.limits", []any{monthlyLimit()})
	if err := e.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("an override with a calendar limit was refused: %v", err)
	}
}
