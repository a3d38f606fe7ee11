package engine

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// override is what one caller of a rule is given by a RateLimitOverride: a tier, until an
// expiry (0: none).
type override struct {
	tier      *Tier
	expiresMs int64
}

// OverridePrefix begins the name of the tier of an override with limits of its own:
// "override/<RateLimitOverride name>".
const OverridePrefix = "override/"

// overrides are a rule's compiled overrides.
type overrides struct {
	// byCaller is the override of each caller, by snapshot.IdentitySum.
	byCaller map[[8]byte]override
	// tiers are the tiers of the overrides with limits of their own, in snapshot order.
	tiers []*Tier
}

// compileOverrides indexes the overrides of p by caller hash. A caller named by several
// overrides gets the first by name (the snapshot lists them sorted), so the answer never
// depends on map order. tiers are the rule's tiers, the default first. Overrides with the
// same limits share one compiled limiter policy: thousands of overrides are mostly a few
// plans.
func compileOverrides(namespace string, functions bool, p snapshot.Entry, tiers []*Tier) (overrides, error) {
	if len(p.Overrides) == 0 {
		return overrides{}, nil
	}
	c := overrideCompiler{namespace: namespace, functions: functions, entry: p,
		byName: make(map[string]*Tier, len(tiers)), policies: map[string]*limiter.Policy{}}
	for _, t := range tiers {
		c.byName[t.Name] = t
	}
	n := 0
	for _, o := range p.Overrides {
		n += len(o.Callers)
	}
	out := overrides{byCaller: make(map[[8]byte]override, n)}
	for _, o := range p.Overrides {
		t, own, err := c.tier(o)
		if err != nil {
			return overrides{}, fmt.Errorf("override %q: %w", o.Name, err)
		}
		if own {
			out.tiers = append(out.tiers, t)
		}
		for _, h := range o.Callers {
			var sum [8]byte
			if len(h) != hex.EncodedLen(len(sum)) {
				continue // not a hash the controller writes: no identity has it
			}
			if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
				continue
			}
			if _, taken := out.byCaller[sum]; !taken {
				out.byCaller[sum] = override{tier: t, expiresMs: o.ExpiresMs}
			}
		}
	}
	return out, nil
}

// overrideCompiler compiles the tiers of one entry's overrides.
type overrideCompiler struct {
	namespace string
	functions bool
	entry     snapshot.Entry
	// byName are the entry's tiers by name.
	byName map[string]*Tier
	// policies are the limiter policies compiled so far, by their limits.
	policies map[string]*limiter.Policy
}

// tier is the tier override o gives: one of the rule's, or (own) its own limits compiled.
func (c *overrideCompiler) tier(o snapshot.Override) (t *Tier, own bool, err error) {
	if o.Tier != "" {
		t, ok := c.byName[o.Tier]
		if !ok {
			return nil, false, fmt.Errorf("tier %q: no such tier", o.Tier)
		}
		return t, false, nil
	}
	key := fmt.Sprint(o.Limits)
	pol, ok := c.policies[key]
	if !ok {
		if pol, err = limiterspec.CompileLimits(c.namespace, c.entry, o.Limits, c.functions); err != nil {
			return nil, false, err
		}
		c.policies[key] = pol
	}
	return &Tier{Name: OverridePrefix + o.Name, Limits: o.Limits, Policy: pol}, true, nil
}

// overridden is the tier an override gives the caller identity at now, if any.
func (r *Rule) overridden(identity string, now time.Time) (*Tier, bool) {
	o, ok := r.overrides.byCaller[snapshot.IdentitySum(identity)]
	if !ok || (o.expiresMs != 0 && now.UnixMilli() >= o.expiresMs) {
		return nil, false
	}
	return o.tier, true
}
