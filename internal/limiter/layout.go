package limiter

import "github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"

// checkLayout applies keylayout's layout rules to c's templates, naming each problem's
// field in the RateLimitPolicy spec.
func checkLayout(c Spec, state, idem *keylayout.Template) FieldErrors {
	sample := keylayout.Values{Namespace: c.Namespace, Policy: c.Name}
	if len(c.Limits) > 0 {
		sample.Limit = c.Limits[0].Name
	}
	var errs FieldErrors
	for _, p := range keylayout.CheckLayout(state, idem, len(c.Limits), sample) {
		errs = append(errs, &FieldError{Field: "keyLayout." + p.Template, Detail: p.Detail})
	}
	return errs
}
