package policy_test

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// withTier adds a tier "pro" selected by when, with limits.
func withTier(when string, limits ...v1alpha1.Limit) func(*v1alpha1.RateLimitPolicy) {
	return func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Tiers = append(p.Spec.Tiers, v1alpha1.Tier{Name: "pro", When: when, Limits: limits})
	}
}

// Every tier problem the CRD schema cannot see is refused naming its field.
func TestTiersRefused(t *testing.T) {
	perSecond := func(n int64) v1alpha1.Limit { return limit("per-second", n, time.Second, 0) }
	for _, tc := range []rejectCase{
		{name: "condition does not compile", mutate: withTier(`headers["x-plan" == "pro"`, perSecond(50)),
			field: "spec.tiers[0].when", msgs: []string{"Syntax error"}},
		{name: "condition is not a bool", mutate: withTier(`headers["x-plan"]`, perSecond(50)),
			field: "spec.tiers[0].when", msgs: []string{"must be a bool"}},
		{name: "condition reads an unknown name", mutate: withTier(`plan == "pro"`, perSecond(50)),
			field: "spec.tiers[0].when", msgs: []string{"undeclared reference", "plan"}},
		{name: "condition too costly", mutate: withTier(`headers.all(k, headers.all(j, headers[k].matches(headers[j])))`, perSecond(50)),
			field: "spec.tiers[0].when", msgs: []string{"estimated cost"}},
		{name: "same limit name, another period", mutate: withTier(`true`, limit("per-second", 50, time.Minute, 0)),
			field: "spec.tiers[0].limits[0].period", msgs: []string{`limit "per-second" has period 1s in spec.limits[0]`, "one period"}},
		{name: "tier limit breaks the limiter's rules", mutate: withTier(`true`, limit("fast", 2000, time.Millisecond, 0)),
			field: "spec.tiers[0].limits[0].requests", msgs: []string{"more than one request per microsecond"}},
		{name: "tier period finer than a millisecond", mutate: withTier(`true`, limit("odd", 3, 1500*time.Microsecond, 0)),
			field: "spec.tiers[0].limits[0].period", msgs: []string{"whole number of milliseconds"}, also: []string{"spec.tiers[0].limits[0].requests"}},
		{name: "tiers with shards", mutate: func(p *v1alpha1.RateLimitPolicy) {
			withTier(`true`, perSecond(50))(p)
			p.Spec.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}}
			p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](4)}
		}, field: "spec.tiers", msgs: []string{"hotKeys.shards"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mutate(p)
			(policy.Rules{}).Default(p)
			_, errs := (policy.Rules{}).CompileAsIs(p)
			assertErrors(t, errs, tc.field, tc.msgs, tc.also...)
		})
	}
}

// The defaulted TTL covers the tier with the longest horizon, so no tier's state expires
// while it still counts; and a valid tiered policy publishes its tiers.
func TestTiersDefaultTTLAndEntry(t *testing.T) {
	p := base()
	withTier(`headers["x-plan"] == "pro"`, limit("per-second", 50, time.Second, 0), limit("per-day", 100000, 24*time.Hour, 0))(p)
	c, errs := (policy.Rules{}).Compile(p)
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	if got := c.Entry.TTLMs; got < (24 * time.Hour).Milliseconds() {
		t.Errorf("defaulted ttl %d ms, shorter than the pro tier's day", got)
	}
	if len(c.Entry.Tiers) != 1 || c.Entry.Tiers[0].Name != "pro" || len(c.Entry.Tiers[0].Limits) != 2 ||
		c.Entry.Tiers[0].When != `headers["x-plan"] == "pro"` {
		t.Errorf("published tiers %+v", c.Entry.Tiers)
	}
}
