package policy

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// Rules are the installation's settings that defaulting and validation depend on: the
// webhook and the controller hold the same Rules (from the manager's flags) and so refuse
// and default alike. The zero value is the default installation.
type Rules struct {
	// KeyPrefix begins every key, after the hash tag's brace and before the namespace:
	// every key of namespace ns begins with "{<KeyPrefix>ns/". Empty means
	// keylayout.DefaultPrefix ("rl:"). It must pass keylayout.ValidatePrefix.
	KeyPrefix string
}

// Prefix is the key prefix in force.
func (r Rules) Prefix() string {
	if r.KeyPrefix == "" {
		return keylayout.DefaultPrefix
	}
	return r.KeyPrefix
}

// checkScope requires every key template of p to lie in its namespace's scope (see
// keylayout.InScope): a policy can name its own namespace's keys, never another
// namespace's, a constant key, or a key outside the installation's prefix.
func (r Rules) checkScope(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	kl := s.KeyLayout
	if kl == nil {
		return nil
	}
	var errs field.ErrorList
	check := func(name, src string) {
		if src == "" {
			return
		}
		t, err := keylayout.Parse(src)
		if err != nil {
			return // reported by the limiter's own parse, with the offset
		}
		if err := keylayout.InScope(t, r.Prefix()); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("keyLayout", name), src, err.Error()))
		}
	}
	check("state", kl.State)
	if s.Idempotency != nil {
		check("idempotency", kl.Idempotency)
	}
	return errs
}
