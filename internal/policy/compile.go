package policy

import (
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

var specPath = field.NewPath("spec")

// Config is the limiter's view of a (defaulted) policy.
func Config(p *v1alpha1.RateLimitPolicy) limiter.PolicyConfig {
	s := &p.Spec
	c := limiter.PolicyConfig{
		Namespace:   p.Namespace,
		Name:        p.Name,
		Algorithm:   limiter.Algorithm(s.Algorithm),
		Limits:      limits(s.Limits),
		FailureMode: limiter.FailureMode(s.FailureMode),
	}
	if c.FailureMode == "" {
		c.FailureMode = limiter.FailOpen
	}
	if kl := s.KeyLayout; kl != nil {
		c.StateKey = kl.State
		if kl.TTL != nil {
			c.TTL = kl.TTL.Duration
		}
		if s.Idempotency != nil {
			c.IdempotencyKey = kl.Idempotency
		}
	}
	if s.Idempotency != nil {
		c.IdempotencyTTL = s.Idempotency.TTL.Duration
		c.IdempotencyMaxReplays = limiter.DefaultMaxReplays
		if n := s.Idempotency.MaxReplays; n != 0 { // 0: stored before the field existed
			c.IdempotencyMaxReplays = int(n)
		}
	}
	if lc := s.LocalCap; lc != nil {
		c.LocalCap = &limiter.LocalCapConfig{Requests: lc.Requests, Period: lc.Period.Duration,
			MaxIdentities: int(lc.MaxIdentities)}
	}
	return c
}

func limits(in []v1alpha1.Limit) []limiter.Limit {
	out := make([]limiter.Limit, len(in))
	for i, l := range in {
		out[i] = limiter.Limit{Name: l.Name, Requests: l.Requests, Period: l.Period.Duration}
		if l.Burst != nil {
			out[i].Burst = *l.Burst
		}
	}
	return out
}

// Compile checks a defaulted policy with the limiter's own rules (the ones its scripts need)
// plus the API rules the schema cannot express, among them the key scope of r, and returns
// the compiled policy or every problem with its field path.
func (r Rules) Compile(p *v1alpha1.RateLimitPolicy) (*limiter.Policy, field.ErrorList) {
	errs := checkSpec(&p.Spec)
	errs = append(errs, r.checkScope(&p.Spec)...)
	c := Config(p)
	if c.TTL == 0 { // already reported as required; do not report it twice as too short
		c.TTL = limiter.Horizon(c.Algorithm, c.Limits)
	}
	compiled, err := limiter.NewPolicy(c)
	if err != nil {
		errs = append(errs, fieldErrors(err)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if err := checkPublished(p, compiled); err != nil {
		return nil, field.ErrorList{field.InternalError(specPath, err)}
	}
	return compiled, nil
}

// checkPublished compiles the snapshot entry of a compiled policy the way every sidecar
// will, and fails unless that gives exactly the policy checked here: the controller must
// never publish what a sidecar refuses or runs differently. The whole-millisecond rules of
// checkSpec make this hold; this is the proof, run on every compile.
func checkPublished(p *v1alpha1.RateLimitPolicy, compiled *limiter.Policy) error {
	entry := Snapshot(p, compiled)
	published, err := entry.Compile(p.Namespace)
	if err != nil {
		return fmt.Errorf("the sidecars would refuse this policy's snapshot entry: %w", err)
	}
	if !reflect.DeepEqual(published.PolicyConfig, compiled.PolicyConfig) {
		return fmt.Errorf("the sidecars would run this policy as %+v, not as checked (%+v)", published.PolicyConfig, compiled.PolicyConfig)
	}
	return nil
}

// fieldErrors maps the limiter's spec-relative field errors onto spec paths.
func fieldErrors(err error) field.ErrorList {
	var out field.ErrorList
	fes, ok := err.(limiter.FieldErrors) //nolint:errorlint // NewPolicy returns this type unwrapped.
	if !ok {
		return field.ErrorList{field.InternalError(specPath, err)}
	}
	for _, fe := range fes {
		out = append(out, field.Invalid(specPath.Child(fe.Field), field.OmitValueType{}, fe.Detail))
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

// checkMilliseconds requires every duration to be a whole number of milliseconds: the
// snapshot carries milliseconds, so a finer duration would reach the sidecars truncated
// (10 per 1.9ms would run as 10 per 1ms, 90% more).
func checkMilliseconds(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	var errs field.ErrorList
	check := func(path *field.Path, d time.Duration) {
		if d%time.Millisecond != 0 {
			errs = append(errs, field.Invalid(path, d.String(),
				d.String()+" is not a whole number of milliseconds, the finest unit the sidecars run"))
		}
	}
	for i, l := range s.Limits {
		check(specPath.Child("limits").Index(i).Child("period"), l.Period.Duration)
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
