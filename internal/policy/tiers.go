package policy

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/internal/condition"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// checkTiers checks the tiers of entry e of namespace the way each sidecar compiles them:
// every condition compiles (a bool within condition.MaxCost), every tier's limits pass the
// limiter's rules with the policy's TTL (but for calendars calendarErrs already reports),
// and a limit name has one period (or calendar) in every tier, since a name is one counter.
func checkTiers(namespace string, e snapshot.Entry, ttl time.Duration, calendarErrs field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	if len(e.Tiers) > 0 && e.Shards > 1 {
		errs = append(errs, field.Invalid(specPath.Child("tiers"), len(e.Tiers),
			"tiers cannot be combined with hotKeys.shards: a sharded limit splits one global budget over shards, and tiers give callers budgets of their own"))
	}
	seen := map[string]firstPeriod{}
	for j, l := range e.Limits {
		seen[l.Name] = firstPeriod{l, fmt.Sprintf("spec.limits[%d]", j)}
	}
	for i, t := range e.Tiers {
		path := specPath.Child("tiers").Index(i)
		if _, err := condition.Compile(t.When); err != nil {
			errs = append(errs, field.Invalid(path.Child("when"), t.When, err.Error()))
		}
		c := limiterspec.OfTier(namespace, e, i)
		c.TTL = ttl
		if fes := limiter.Validate(c); len(fes) > 0 {
			errs = append(errs, unlessReported(calendarErrs, fieldErrors(path, fes))...)
		}
		errs = append(errs, samePeriods(path, t.Limits, seen)...)
	}
	return errs
}

// firstPeriod is the limit a name was first given, and where.
type firstPeriod struct {
	limit snapshot.Limit
	where string
}

// samePeriods refuses a limit of the tier at path whose name another tier (or spec.limits)
// gives another period, or another calendar unit or time zone: the windows of two periods
// are not the same windows, so a caller moved between the tiers would count in the wrong
// one. seen records each name's first limit.
func samePeriods(path *field.Path, ls []snapshot.Limit, seen map[string]firstPeriod) field.ErrorList {
	var errs field.ErrorList
	for j, l := range ls {
		first, ok := seen[l.Name]
		if !ok {
			seen[l.Name] = firstPeriod{l, path.Child("limits").Index(j).String()}
			continue
		}
		if sameWindows(first.limit, l) {
			continue
		}
		at := path.Child("limits").Index(j).Child("period")
		if l.Calendar != nil {
			at = path.Child("limits").Index(j).Child("calendar")
		}
		errs = append(errs, field.Invalid(at, l.Per(), fmt.Sprintf(
			"limit %q has %s in %s; a limit name is one counter in every tier, so it needs one period (or one calendar unit and time zone; name this limit otherwise to count it apart)",
			l.Name, windows(first.limit), first.where)))
	}
	return errs
}

// sameWindows reports whether a and b count in the same windows: the same period, or the
// same calendar unit in the same time zone.
func sameWindows(a, b snapshot.Limit) bool {
	if a.Calendar == nil || b.Calendar == nil {
		return a.Calendar == nil && b.Calendar == nil && a.PeriodMs == b.PeriodMs
	}
	return *a.Calendar == *b.Calendar
}

// windows names the windows of l for a message: "period 1s", "calendar Month in UTC".
func windows(l snapshot.Limit) string {
	if l.Calendar != nil {
		return l.Per()
	}
	return "period " + l.Per()
}
