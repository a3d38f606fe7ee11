package policy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Override is RateLimitOverride o as the snapshot carries it for the published entry e of
// its policy, or every reason it does not fit that policy with its field path: a tier the
// policy does not have, a caller's source the identity does not have, limits the limiter
// refuses with the policy's TTL, a calendar limit the policy cannot run, or a limit whose
// name the policy (or one of its tiers) gives another period or calendar. Callers are hashed here (snapshot.IdentityHash of the identity as
// the sidecar counts it), so no raw value reaches the snapshot.
func Override(e snapshot.Entry, namespace string, o *v1alpha1.RateLimitOverride) (snapshot.Override, field.ErrorList) {
	spec := field.NewPath("spec")
	out := snapshot.Override{Name: o.Name, Tier: o.Spec.Tier}
	var errs field.ErrorList
	if o.Spec.Tier != "" && o.Spec.Tier != snapshot.DefaultTier &&
		!slices.ContainsFunc(e.Tiers, func(t snapshot.Tier) bool { return t.Name == o.Spec.Tier }) {
		errs = append(errs, field.NotFound(spec.Child("tier"), o.Spec.Tier))
	}
	if e.Shards > 1 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "policyName"), o.Spec.PolicyName,
			"the policy has hotKeys.shards: a sharded limit splits one global budget over shards, and an override gives callers budgets of their own"))
	}
	if len(o.Spec.Limits) > 0 {
		out.Limits = wireLimits(o.Spec.Limits)
		var calendarErrs field.ErrorList
		for i, l := range o.Spec.Limits {
			errs = append(errs, periodMs(spec.Child("limits").Index(i), l)...)
			calendarErrs = append(calendarErrs, overrideCalendar(spec.Child("limits").Index(i), l, e)...)
			if l.Burst != nil && e.Algorithm != string(limiter.TokenBucket) && e.Algorithm != string(limiter.GCRA) {
				errs = append(errs, field.Invalid(spec.Child("limits").Index(i).Child("burst"), *l.Burst,
					"burst is only allowed when the policy's algorithm is TokenBucket or GCRA; it is "+e.Algorithm))
			}
		}
		errs = append(errs, calendarErrs...)
		errs = append(errs, checkOverrideLimits(spec, namespace, e, out.Limits, calendarErrs)...)
	}
	if (o.Spec.Tier == "") == (len(o.Spec.Limits) == 0) {
		errs = append(errs, field.Required(spec.Child("tier"), "set exactly one of tier and limits"))
	}
	callers, cerrs := overrideCallers(spec.Child("callers"), e.Identity, o.Spec.Callers)
	out.Callers = callers
	errs = append(errs, cerrs...)
	if o.Spec.Expires != nil {
		out.ExpiresMs = o.Spec.Expires.UnixMilli()
	}
	if len(errs) > 0 {
		return snapshot.Override{}, errs
	}
	return out, nil
}

// overrideCalendar checks the calendar of the override's limit l at path against the
// policy's published entry e: its algorithm, which the override cannot change, so the limit
// is the field at fault.
func overrideCalendar(path *field.Path, l v1alpha1.Limit, e snapshot.Entry) field.ErrorList {
	return checkCalendar(path, l, e.Algorithm)
}

// checkOverrideLimits checks an override's own limits as a tier's: the limiter's rules with
// the policy's TTL (the callers' keys live that long; but for calendars calendarErrs
// already reports), and one period (or calendar) per limit name.
func checkOverrideLimits(spec *field.Path, namespace string, e snapshot.Entry, ls []snapshot.Limit, calendarErrs field.ErrorList) field.ErrorList {
	c := limiterspec.OfLimits(namespace, e, ls)
	var errs field.ErrorList
	if fes := limiter.Validate(c); len(fes) > 0 {
		for _, fe := range unlessReported(calendarErrs, fieldErrors(spec, fes)) {
			// The override's limits are checked with the policy's settings: a problem with
			// one of those (its TTL, too short for these limits) is the limits' to fix here.
			if rest, ok := strings.CutPrefix(fe.Field, "spec."); ok && !strings.HasPrefix(rest, "limits") {
				fe = field.Invalid(spec.Child("limits"), field.OmitValueType{}, "with the policy's "+rest+": "+fe.Detail+
					" (give these callers limits within it, or change the policy)")
			}
			errs = append(errs, fe)
		}
	}
	seen := map[string]firstPeriod{}
	for j, l := range e.Limits {
		seen[l.Name] = firstPeriod{l, fmt.Sprintf("the policy's spec.limits[%d]", j)}
	}
	for i, t := range e.Tiers {
		for j, l := range t.Limits {
			if _, ok := seen[l.Name]; !ok {
				seen[l.Name] = firstPeriod{l, fmt.Sprintf("the policy's spec.tiers[%d].limits[%d]", i, j)}
			}
		}
	}
	return append(errs, samePeriods(spec, ls, seen)...)
}

// overrideCallers is the sorted, deduplicated hashes of callers as identity counts them.
func overrideCallers(path *field.Path, id snapshot.Identity, callers []v1alpha1.OverrideCaller) ([]string, field.ErrorList) {
	var errs field.ErrorList
	out := make([]string, 0, len(callers))
	for i, c := range callers {
		switch {
		case c.Hash != "":
			out = append(out, c.Hash)
		case c.Value == "":
			errs = append(errs, field.Required(path.Index(i), "set exactly one of value and hash"))
		case len(id.Parts) > 0:
			errs = append(errs, field.Invalid(path.Index(i).Child("value"), field.OmitValueType{},
				"the policy has a composite identity (identity.parts): name the caller by hash, the IdentityHash of the combined identity as counted"))
		default:
			src := 0
			if c.Source != nil {
				src = int(*c.Source)
			}
			if src < 0 || src >= len(id.Sources) {
				errs = append(errs, field.Invalid(path.Index(i).Child("source"), src,
					fmt.Sprintf("the policy's identity has %d sources (positions 0 to %d)", len(id.Sources), len(id.Sources)-1)))
				continue
			}
			out = append(out, snapshot.IdentityHash(id.Sourced(src, c.Value)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), errs
}
