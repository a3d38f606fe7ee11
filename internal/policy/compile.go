package policy

import (
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
// plus the API rules the schema cannot express, and returns the compiled policy or every
// problem with its field path.
func Compile(p *v1alpha1.RateLimitPolicy) (*limiter.Policy, field.ErrorList) {
	errs := checkSpec(&p.Spec)
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
	return compiled, nil
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
	if s.KeyLayout == nil || s.KeyLayout.TTL == nil {
		errs = append(errs, field.Required(specPath.Child("keyLayout", "ttl"),
			"a TTL is required so idle identities' keys expire; omit keyLayout.ttl to get the algorithm's horizon from the defaulting webhook"))
	}
	if c := s.Cost; c != nil && c.Max != nil && *c.Max < c.Default {
		errs = append(errs, field.Invalid(specPath.Child("cost", "max"), *c.Max,
			"must be at least cost.default"))
	}
	return errs
}
