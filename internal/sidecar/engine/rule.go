package engine

import (
	"fmt"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Rule is one policy of a loaded snapshot, compiled for the hot path: the limiter's compiled
// policy bound to the policy's matcher, identity sources and cost. Immutable.
type Rule struct {
	// Entry is the policy as published.
	Entry snapshot.Entry
	// Policy is the limiter's compiled form.
	Policy *limiter.Policy
	// hosts are the lower-cased Host patterns of each HTTP match entry, parallel to Spec.Match.HTTP.
	hosts [][]string
	// prefixes are the compiled path prefixes of each HTTP match entry, parallel to Spec.Match.HTTP.
	prefixes [][]httppath.Prefix
	// fingerprint identifies Spec, so a reload can reuse an unchanged rule (and its local cap).
	fingerprint string
	// def is the default tier: Entry.Limits and Policy.
	def Tier
	// tiers are the other tiers, in the order their conditions are tried.
	tiers []*Tier
	// overrides are the tiers RateLimitOverrides give callers.
	overrides overrides
}

// Name is the policy's name.
func (r *Rule) Name() string { return r.Entry.Name }

// newRule compiles p; functions says the manager loaded the scripts as Redis functions,
// to be called with FCALL (snapshot.Redis.Functions).
func newRule(namespace string, functions bool, p snapshot.Entry) (*Rule, error) {
	if id := p.Identity; len(id.Parts) > requestread.MaxParts || len(id.Parts) > 0 && len(id.Sources) > 0 {
		return nil, fmt.Errorf("policy %q: identity: %d parts and %d sources: a composite identity has at most %d parts, and no sources of its own", p.Name, len(id.Parts), len(id.Sources), requestread.MaxParts)
	}
	compiled, err := limiterspec.Compile(namespace, p, functions)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	tiers, err := compileTiers(namespace, functions, p)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	r := &Rule{Entry: p, Policy: compiled, fingerprint: fingerprint(p), tiers: tiers,
		def: Tier{Name: snapshot.DefaultTier, Limits: p.Limits, Policy: compiled}}
	if r.overrides, err = compileOverrides(namespace, functions, p, append([]*Tier{&r.def}, tiers...)); err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	for _, m := range p.Match.HTTP {
		r.hosts = append(r.hosts, lowerAll(m.Hosts))
		r.prefixes = append(r.prefixes, compilePrefixes(m.PathPrefixes))
	}
	return r, nil
}
