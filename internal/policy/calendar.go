package policy

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// defaultTimeZone is the time zone of a calendar limit that names none (the CRD's default).
const defaultTimeZone = "UTC"

// checkCalendars checks the calendar limits of spec.limits and of every tier (see
// checkCalendar); with hotKeys.leases On, the first calendar limit is refused on
// spec.hotKeys.leases, the setting that does not support it yet.
func checkCalendars(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	var errs field.ErrorList
	var first *field.Path
	each := func(path *field.Path, l v1alpha1.Limit) {
		errs = append(errs, checkCalendar(path, l, string(s.Algorithm))...)
		if l.Calendar != nil && first == nil {
			first = path.Child("calendar")
		}
	}
	for i, l := range s.Limits {
		each(specPath.Child("limits").Index(i), l)
	}
	for i, t := range s.Tiers {
		for j, l := range t.Limits {
			each(specPath.Child("tiers").Index(i).Child("limits").Index(j), l)
		}
	}
	if first != nil && leasesOn(s.HotKeys) {
		errs = append(errs, field.Invalid(specPath.Child("hotKeys", "leases"), v1alpha1.LeaseModeOn,
			"leases are not supported with calendar limits yet ("+first.String()+"): use leases Off, or a period"))
	}
	return errs
}

// leasesOn reports whether hk turns leases on.
func leasesOn(hk *v1alpha1.HotKeys) bool { return hk != nil && hk.Leases == v1alpha1.LeaseModeOn }

// checkCalendar refuses the calendar of limit l at path that the limiter cannot run under
// algorithm: a calendar beside a period, under another algorithm than FixedWindow, of an
// unknown unit, or in a time zone this build does not know (or "Local", which differs
// between machines). A limit without a calendar passes.
func checkCalendar(path *field.Path, l v1alpha1.Limit, algorithm string) field.ErrorList {
	c := l.Calendar
	if c == nil {
		return nil
	}
	path = path.Child("calendar")
	var errs field.ErrorList
	if l.Period.Duration != 0 {
		errs = append(errs, field.Invalid(path, c.Unit, "set exactly one of period and calendar: a limit counts per period or per calendar window"))
	}
	if algorithm != string(limiter.FixedWindow) {
		errs = append(errs, field.Invalid(path, c.Unit, "calendar windows are for FixedWindow: the algorithm is "+algorithm+
			" (use FixedWindow, or give this limit a period)"))
	}
	if err := calendar.Unit(c.Unit).Check(); err != nil {
		errs = append(errs, field.NotSupported(path.Child("unit"), c.Unit, calendarUnits()))
	}
	if _, err := calendar.LoadZone(c.TimeZone); err != nil {
		errs = append(errs, field.Invalid(path.Child("timeZone"), c.TimeZone, err.Error()))
	}
	return errs
}

// calendarUnits are the units a calendar limit may name, as the API spells them.
func calendarUnits() []string {
	out := make([]string, 0, len(calendar.Units))
	for _, u := range calendar.Units {
		out = append(out, string(u))
	}
	return out
}
