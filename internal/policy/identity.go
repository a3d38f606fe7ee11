package policy

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// checkIdentity holds spec.identity to what the fronts can read, naming the source at
// fault: exactly one of sources and parts; a Descriptor source only with match.envoy (only
// the Envoy front has descriptors); a Method or PathPrefix source only with match.http or
// targetRefs (only the HTTP fronts see a method and a path); and a composite identity with
// at least one part that is not Fixed. The CRD schema says the same; the controller calls
// this on stored objects too, which may predate a schema rule.
func checkIdentity(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	path := specPath.Child("identity")
	id := s.Identity
	var errs field.ErrorList
	switch {
	case len(id.Sources) > 0 && len(id.Parts) > 0:
		errs = append(errs, field.Invalid(path, field.OmitValueType{},
			"set exactly one of sources (a fallback chain) and parts (a composite identity), not both"))
	case len(id.Sources) == 0 && len(id.Parts) == 0:
		errs = append(errs, field.Required(path.Child("sources"),
			"set sources (a fallback chain: the first source present is the identity) or parts (a composite identity)"))
	}
	http := len(s.Match.HTTP) > 0 || len(s.TargetRefs) > 0
	envoy := s.Match.Envoy != nil
	check := func(p *field.Path, src v1alpha1.IdentitySource) {
		switch src.Type {
		case v1alpha1.IdentityMethod, v1alpha1.IdentityPathPrefix:
			if !http {
				errs = append(errs, field.Invalid(p, string(src.Type),
					"source type "+string(src.Type)+" needs match.http or targetRefs: it reads the HTTP request, which the Envoy RLS front never sees"))
			}
		case v1alpha1.IdentityDescriptor:
			if !envoy {
				errs = append(errs, field.Invalid(p, string(src.Type),
					"source type Descriptor needs match.envoy: descriptors only exist on the Envoy front"))
			}
		}
	}
	for i, src := range id.Sources {
		check(path.Child("sources").Index(i), src)
	}
	allFixed := len(id.Parts) > 0
	for i, part := range id.Parts {
		for j, src := range part.Sources {
			check(path.Child("parts").Index(i).Child("sources").Index(j), src)
			allFixed = allFixed && src.Type == v1alpha1.IdentityFixed
		}
	}
	if allFixed {
		errs = append(errs, field.Invalid(path.Child("parts"), field.OmitValueType{},
			"every part is Fixed, so every caller shares one counter: for a global limit use sources with one Fixed source"))
	}
	return errs
}

// chains are the fallback chains of id: its sources, or each of its parts' sources.
func chains(id v1alpha1.Identity) []v1alpha1.IdentitySources {
	if len(id.Parts) == 0 {
		return []v1alpha1.IdentitySources{id.Sources}
	}
	out := make([]v1alpha1.IdentitySources, len(id.Parts))
	for i, p := range id.Parts {
		out[i] = p.Sources
	}
	return out
}

// callerIndependent reports whether id yields the same identity for every caller of a
// request (every source Fixed, Method or PathPrefix): one budget shared by all callers, per
// method or route, which shards may spread.
func callerIndependent(id v1alpha1.Identity) bool {
	n := 0
	for _, c := range chains(id) {
		for _, s := range c {
			switch s.Type {
			case v1alpha1.IdentityFixed, v1alpha1.IdentityMethod, v1alpha1.IdentityPathPrefix:
				n++
			default:
				return false
			}
		}
	}
	return n > 0
}

// alwaysYields reports whether the chain yields a value for every request: it has a Fixed
// source, or a Method or PathPrefix source, which every HTTP request it governs has.
func alwaysYields(c v1alpha1.IdentitySources) bool {
	for _, s := range c {
		switch s.Type {
		case v1alpha1.IdentityFixed, v1alpha1.IdentityMethod, v1alpha1.IdentityPathPrefix:
			return true
		}
	}
	return false
}
