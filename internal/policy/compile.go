package policy

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

var specPath = field.NewPath("spec")

// Compiled is a RateLimitPolicy ready to publish: its snapshot entry, exactly what the
// sidecars receive and compile (limiterspec.Compile).
type Compiled struct {
	// Entry is the policy's snapshot entry.
	Entry snapshot.Entry
}

// Compile is the one path from a RateLimitPolicy to what runs: it defaults a copy of p with
// r, checks it (Validate), and converts it to its snapshot entry, or returns every problem
// with its field path. The controller, the tests and the bench take it, and every sidecar
// compiles the same entry (limiterspec.Compile), so what was checked is what runs.
func (r Rules) Compile(p *v1alpha1.RateLimitPolicy) (Compiled, field.ErrorList) {
	d := p.DeepCopy()
	r.Default(d)
	if errs := r.Validate(d); len(errs) > 0 {
		return Compiled{}, errs
	}
	return Compiled{Entry: Entry(d)}, nil
}

// CompileAsIs is Compile of p as it is, without defaulting, and its entry compiled the way
// each sidecar compiles it: the policy that runs (tests and fuzzers look into it).
func (r Rules) CompileAsIs(p *v1alpha1.RateLimitPolicy) (*limiter.Policy, field.ErrorList) {
	if errs := r.Validate(p); len(errs) > 0 {
		return nil, errs
	}
	compiled, err := limiterspec.Compile(p.Namespace, Entry(p), false)
	if err != nil {
		return nil, fieldErrors(specPath, err)
	}
	return compiled, nil
}

// Validate checks p as it is (the validating webhook sees it defaulted already; a stored
// object may predate a default) with the rules the API schema cannot express (TTL, cost,
// whole milliseconds, key scope, calendar windows) and the limiter's own rules
// (limiter.Validate) for its snapshot entry, every tier and override limit included. It
// builds nothing that runs.
func (r Rules) Validate(p *v1alpha1.RateLimitPolicy) field.ErrorList {
	errs := checkSpec(&p.Spec)
	errs = append(errs, checkIdentity(&p.Spec)...)
	errs = append(errs, r.checkScope(&p.Spec)...)
	errs = append(errs, checkShards(&p.Spec)...)
	calendarErrs := checkCalendars(&p.Spec)
	errs = append(errs, calendarErrs...)
	entry := Entry(p)
	c := limiterspec.Of(p.Namespace, entry)
	if kl := p.Spec.KeyLayout; kl == nil || kl.TTL == nil { // reported as required; not also as too short
		c.TTL = limiterspec.Horizon(p.Namespace, entry)
	}
	if fes := limiter.Validate(c); len(fes) > 0 {
		errs = append(errs, unlessReported(calendarErrs, fieldErrors(specPath, fes))...)
	}
	return append(errs, checkTiers(p.Namespace, entry, c.TTL, calendarErrs)...)
}

// fieldErrors maps the limiter's spec-relative field errors onto paths under base.
func fieldErrors(base *field.Path, err error) field.ErrorList {
	var out field.ErrorList
	fes, ok := err.(limiter.FieldErrors) //nolint:errorlint // Validate and NewPolicy return this type unwrapped.
	if !ok {
		return field.ErrorList{field.InternalError(specPath, err)}
	}
	for _, fe := range fes {
		out = append(out, field.Invalid(base.Child(fe.Field), field.OmitValueType{}, fe.Detail))
	}
	return out
}

// checkSpec checks the rules the limiter does not own: a TTL must be stated (the defaulter
// supplies one) and cost must be coherent. The CRD schema checks cost too; the controller
// calls this on stored objects, which may predate a schema rule.
func checkSpec(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	var errs field.ErrorList
	ttlPath := specPath.Child("keyLayout", "ttl")
	switch {
	case s.KeyLayout == nil || s.KeyLayout.TTL == nil:
		errs = append(errs, field.Required(ttlPath,
			"a TTL is required so idle identities' keys expire; omit keyLayout.ttl to get the algorithm's horizon from the defaulting webhook"))
	case s.KeyLayout.TTL.Duration <= 0:
		errs = append(errs, field.Invalid(ttlPath, s.KeyLayout.TTL.Duration.String(),
			"must be positive: keys without a TTL never expire; omit keyLayout.ttl to get the algorithm's horizon"))
	}
	if c := s.Cost; c != nil && c.Max != nil && *c.Max < c.Default {
		errs = append(errs, field.Invalid(specPath.Child("cost", "max"), *c.Max,
			"must be at least cost.default"))
	}
	return append(errs, checkMilliseconds(s)...)
}

// wholeMs refuses a duration at path that is not a whole number of milliseconds, nil else.
func wholeMs(path *field.Path, d time.Duration) *field.Error {
	if d%time.Millisecond == 0 {
		return nil
	}
	return field.Invalid(path, d.String(), d.String()+" is not a whole number of milliseconds, the finest unit the sidecars run")
}

// periodMs refuses the period of limit l at path when it is not a whole number of
// milliseconds; a calendar limit has no period to check.
func periodMs(path *field.Path, l v1alpha1.Limit) field.ErrorList {
	if l.Calendar != nil {
		return nil
	}
	if err := wholeMs(path.Child("period"), l.Period.Duration); err != nil {
		return field.ErrorList{err}
	}
	return nil
}

// checkMilliseconds requires every duration to be a whole number of milliseconds: the
// snapshot carries milliseconds, so a finer duration would reach the sidecars truncated
// (10 per 1.9ms would run as 10 per 1ms, 90% more).
func checkMilliseconds(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	var errs field.ErrorList
	check := func(path *field.Path, d time.Duration) {
		if err := wholeMs(path, d); err != nil {
			errs = append(errs, err)
		}
	}
	for i, l := range s.Limits {
		errs = append(errs, periodMs(specPath.Child("limits").Index(i), l)...)
	}
	for i, t := range s.Tiers {
		for j, l := range t.Limits {
			errs = append(errs, periodMs(specPath.Child("tiers").Index(i).Child("limits").Index(j), l)...)
		}
	}
	if kl := s.KeyLayout; kl != nil && kl.TTL != nil {
		check(specPath.Child("keyLayout", "ttl"), kl.TTL.Duration)
	}
	if s.Idempotency != nil {
		check(specPath.Child("idempotency", "ttl"), s.Idempotency.TTL.Duration)
	}
	if s.LocalCap != nil {
		check(specPath.Child("localCap", "period"), s.LocalCap.Period.Duration)
	}
	return errs
}
