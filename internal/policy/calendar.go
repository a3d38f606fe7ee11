package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// defaultTimeZone is the time zone of a calendar limit that names none (the CRD's default).
const defaultTimeZone = "UTC"

// checkCalendars checks the calendar limits of spec.limits and of every tier (see
// checkCalendar).
func checkCalendars(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	var errs field.ErrorList
	for i, l := range s.Limits {
		errs = append(errs, checkCalendar(specPath.Child("limits").Index(i), l, string(s.Algorithm))...)
	}
	for i, t := range s.Tiers {
		for j, l := range t.Limits {
			errs = append(errs, checkCalendar(specPath.Child("tiers").Index(i).Child("limits").Index(j), l, string(s.Algorithm))...)
		}
	}
	return errs
}

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

// unlessReported is the limiter's errors les without those on a calendar that own, the
// policy's own calendar errors, already report: the limiter checks calendars too (for the
// sidecars, in fewer words), and one mistake is reported once.
func unlessReported(own, les field.ErrorList) field.ErrorList {
	reported := map[string]bool{}
	for _, e := range own {
		reported[calendarField(e.Field)] = true
	}
	var out field.ErrorList
	for _, e := range les {
		if c := calendarField(e.Field); c == "" || !reported[c] {
			out = append(out, e)
		}
	}
	return out
}

// calendarField is the calendar field that path is or lies under
// ("spec.limits[0].calendar" for "spec.limits[0].calendar.timeZone"), "" when none.
func calendarField(path string) string {
	const name = ".calendar"
	i := strings.Index(path, name)
	if i < 0 {
		return ""
	}
	return path[:i+len(name)]
}
