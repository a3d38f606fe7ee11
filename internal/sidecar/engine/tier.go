package engine

import (
	"fmt"
	"net/http"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/condition"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Tier is one tier of a rule: its limits, compiled for the limiter, and the condition that
// selects it (nil for the default tier, which applies when no other does).
type Tier struct {
	// Name of the tier; snapshot.DefaultTier for the policy's own limits.
	Name string
	// Limits are the tier's limits as published.
	Limits []snapshot.Limit
	// Policy is the limiter's compiled form of the policy with the tier's limits.
	Policy *limiter.Policy
	when   *condition.Condition
}

// compileTiers compiles the tiers of p other than the default one, in order.
func compileTiers(namespace string, functions bool, p snapshot.Entry) ([]*Tier, error) {
	out := make([]*Tier, 0, len(p.Tiers))
	for _, t := range p.Tiers {
		when, err := condition.Compile(t.When)
		if err != nil {
			return nil, fmt.Errorf("tier %q: when: %w", t.Name, err)
		}
		pol, err := limiterspec.CompileLimits(namespace, p, t.Limits, functions)
		if err != nil {
			return nil, fmt.Errorf("tier %q: %w", t.Name, err)
		}
		out = append(out, &Tier{Name: t.Name, Limits: t.Limits, Policy: pol, when: when})
	}
	return out, nil
}

// Default is the rule's default tier: the policy's own limits.
func (r *Rule) Default() *Tier { return &r.def }

// Tiers are the rule's tiers other than the default one, in the order they are tried.
func (r *Rule) Tiers() []*Tier { return r.tiers }

// AllTiers are every tier a request to r may run under: the default, the named tiers, and
// those of the overrides with limits of their own.
func (r *Rule) AllTiers() []*Tier {
	out := make([]*Tier, 0, 1+len(r.tiers)+len(r.overrides.tiers))
	out = append(out, &r.def)
	out = append(out, r.tiers...)
	return append(out, r.overrides.tiers...)
}

// TierFor is the tier that applies to a request: the first tier whose condition holds, or
// the default tier. A condition that read a header sent on several field lines is an error
// (condition.ErrRepeatedHeader): the request is refused, not placed in another tier.
func (r *Rule) TierFor(req *condition.Request) (*Tier, error) {
	for _, t := range r.tiers {
		ok, err := t.when.Holds(req)
		if err != nil {
			return nil, fmt.Errorf("tier %s: %w", t.Name, err)
		}
		if ok {
			return t, nil
		}
	}
	return &r.def, nil
}

// CallerTier is the tier of check c: the one an override gives its caller, else the one
// conds chooses (called only then), else the default.
func (r *Rule) CallerTier(c *Check, conds func() (*Tier, error)) (*Tier, error) {
	if len(r.overrides.byCaller) > 0 && c.HasIdentity {
		if t, ok := r.overridden(c.Identity, time.Now()); ok {
			return t, nil
		}
	}
	if len(r.tiers) == 0 {
		return &r.def, nil
	}
	return conds()
}

// httpTier is the tier of check c of an HTTP request to r. method is the method the
// upstream will run, host the canonical host.
func (r *Rule) httpTier(c *Check, req *requestread.HTTPRequest, method, host string) (*Tier, error) {
	return r.CallerTier(c, func() (*Tier, error) {
		return r.TierFor(&condition.Request{Method: method, Host: host, Path: req.Path.String(), Header: req.Header})
	})
}

// descriptorTier is the tier of check c of an Envoy descriptor to r.
func (r *Rule) descriptorTier(c *Check, entries []requestread.DescriptorEntry) (*Tier, error) {
	return r.CallerTier(c, func() (*Tier, error) { return r.descriptorConditions(entries) })
}

// descriptorConditions is the tier r's conditions choose for a descriptor.
func (r *Rule) descriptorConditions(entries []requestread.DescriptorEntry) (*Tier, error) {
	return r.TierFor(&condition.Request{Header: http.Header{}, Descriptors: func() map[string]string {
		m := make(map[string]string, len(entries))
		for _, e := range entries {
			if _, seen := m[e.Key]; !seen { // the first entry of a key, as identity sources read it
				m[e.Key] = e.Value
			}
		}
		return m
	}})
}
