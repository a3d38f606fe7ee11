package attachment

import (
	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Effective is p as the sidecars run it. A policy without targetRefs is itself. A policy with
// targetRefs gets match.http from what its targets resolved to (r), and ok is false when
// that is nothing: it then has no snapshot entry.
func Effective(p *v1alpha1.RateLimitPolicy, r *Result) (*v1alpha1.RateLimitPolicy, bool) {
	if len(p.Spec.TargetRefs) == 0 {
		return p, true
	}
	if r == nil || len(r.Matches) == 0 {
		return nil, false
	}
	out := p.DeepCopy()
	out.Spec.Match = v1alpha1.Match{HTTP: append([]v1alpha1.HTTPMatch(nil), r.Matches...)}
	return out, true
}

// EffectiveAll is the namespace's policies as the sidecars run them: Effective of each,
// without those that govern nothing.
func EffectiveAll(policies []v1alpha1.RateLimitPolicy, results map[string]*Result) []v1alpha1.RateLimitPolicy {
	out := make([]v1alpha1.RateLimitPolicy, 0, len(policies))
	for i := range policies {
		if e, ok := Effective(&policies[i], results[policies[i].Name]); ok {
			out = append(out, *e)
		}
	}
	return out
}
