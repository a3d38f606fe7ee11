package policy_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// warningCase is a (defaulted) policy, and for updates the (defaulted) old one, with the
// warnings it must draw: one containing each fragment list, and no others.
type warningCase struct {
	name   string
	old    func(p *v1alpha1.RateLimitPolicy) // nil: a create
	mutate func(p *v1alpha1.RateLimitPolicy)
	want   [][]string
}

func onPaths(mode v1alpha1.FailureMode, paths ...string) func(*v1alpha1.RateLimitPolicy) {
	return func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.FailureMode = mode
		p.Spec.Match.HTTP[0].PathPrefixes = paths
		if mode == v1alpha1.FailureModeLocalCap {
			p.Spec.LocalCap = &v1alpha1.LocalCap{Requests: 1, Period: p.Spec.Limits[0].Period, MaxIdentities: 10}
		}
	}
}

func fixedIdentity(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}}
}

func unchanged(*v1alpha1.RateLimitPolicy) {}

const sharedTag = "{rl:${namespace}/${policy}}:${identity}:${limit}"

var warningCases = []warningCase{
	// Hot slot: a tag without ${identity}.
	{name: "tag without ${identity}", mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, sharedTag, "", 0) },
		want: [][]string{{"spec.keyLayout.state: hash tag {rl:${namespace}/${policy}} does not contain ${identity}", "one Redis Cluster slot", "hot key"}}},
	{name: "tag without ${identity}, Fixed only as the fallback", mutate: func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Identity.Sources = append(p.Spec.Identity.Sources,
			v1alpha1.IdentitySource{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "anon"}})
		layout(p, sharedTag, "", 0)
	}, want: [][]string{{"does not contain ${identity}"}}},
	{name: "tag without ${identity}, every identity source Fixed", mutate: func(p *v1alpha1.RateLimitPolicy) {
		fixedIdentity(p)
		layout(p, sharedTag, "", 0)
	}},
	{name: "default tag", mutate: unchanged},
	{name: "custom tag with ${identity}", mutate: func(p *v1alpha1.RateLimitPolicy) {
		layout(p, "{rl:${namespace}/t:${identity}}:${limit}", "", 0)
	}},

	// Leases: admitted, told of the under-admission and the remaining they report.
	{name: "leases On", mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOn} },
		want: [][]string{{"spec.hotKeys.leases: On", "never more than the limits", "under-admission"}}},
	{name: "leases On with GCRA", mutate: func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Algorithm = v1alpha1.AlgorithmGCRA
		p.Spec.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOn}
	}, want: [][]string{{"spec.hotKeys.leases: On", "with GCRA a leased unit must be spent before the time slot"}}},
	{name: "global limit over 3 shards", mutate: func(p *v1alpha1.RateLimitPolicy) {
		fixedIdentity(p)
		p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](3)}
	}, want: [][]string{{"spec.hotKeys.shards: 3 shards", "denied only after every shard denied it", "up to 3 script calls"}}},
	{name: "shards changed", old: func(p *v1alpha1.RateLimitPolicy) { fixedIdentity(p) }, mutate: func(p *v1alpha1.RateLimitPolicy) {
		fixedIdentity(p)
		p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](2)}
	}, want: [][]string{{"spec.hotKeys.shards: 2 shards"}, {"spec.hotKeys.shards: changing 1 to 2 moves the budget to other keys", "full quota"}}},
	{name: "leases Off", mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOff} }},

	// Sources no request reaches: after one that always yields.
	{name: "a source after a Fixed one", mutate: func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Identity.Sources = append([]v1alpha1.IdentitySource{{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}},
			p.Spec.Identity.Sources...)
	}, want: [][]string{{"spec.identity.sources[1] onwards is never read", "sources[0] (Fixed) yields a value for every request"}}},
	{name: "a source after Method in a part", mutate: func(p *v1alpha1.RateLimitPolicy) {
		key := p.Spec.Identity.Sources
		p.Spec.Identity.Sources = nil
		p.Spec.Identity.Parts = []v1alpha1.IdentityPart{{Sources: key},
			{Sources: append([]v1alpha1.IdentitySource{{Type: v1alpha1.IdentityMethod}}, key...)}}
	}, want: [][]string{{"spec.identity.parts[1].sources[1] onwards is never read", "(Method)"}}},

	// onMissing Skip: leaving the identity out escapes the limit.
	{name: "onMissing Skip", mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.Identity.OnMissing = v1alpha1.MissingIdentitySkip },
		want: [][]string{{"spec.identity.onMissing: Skip", "a client escapes this limit by leaving its identity out"}}},
	{name: "onMissing Skip with a Fixed fallback (never skips)", mutate: func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Identity.OnMissing = v1alpha1.MissingIdentitySkip
		p.Spec.Identity.Sources = append(p.Spec.Identity.Sources,
			v1alpha1.IdentitySource{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "anon"}})
	}},

	// FailOpen on sensitive paths.
	{name: "FailOpen on /login", mutate: onPaths(v1alpha1.FailureModeFailOpen, "/login"),
		want: [][]string{{`spec.failureMode: FailOpen admits every request to "/login" while Redis is unavailable`, "FailClosed or LocalCap"}}},
	{name: "FailOpen on /oauth/token", mutate: onPaths(v1alpha1.FailureModeFailOpen, "/api", "/oauth/token"),
		want: [][]string{{`FailOpen admits every request to "/oauth/token"`}}},
	{name: "FailOpen on /payments", mutate: onPaths(v1alpha1.FailureModeFailOpen, "/payments"),
		want: [][]string{{`FailOpen admits every request to "/payments"`}}},
	{name: "failure mode unset on /login (FailOpen by default)", mutate: onPaths("", "/Login"),
		want: [][]string{{`FailOpen admits every request to "/Login"`}}},
	{name: "FailClosed on /login", mutate: onPaths(v1alpha1.FailureModeFailClosed, "/login", "/payments")},
	{name: "LocalCap on /login", mutate: onPaths(v1alpha1.FailureModeLocalCap, "/login")},
	{name: "FailOpen on /search", mutate: onPaths(v1alpha1.FailureModeFailOpen, "/search")},

	// A cost settled from the response and a concurrency limit warn of nothing, on any front.
	{name: "cost settled and concurrency on HTTP and Envoy", mutate: func(p *v1alpha1.RateLimitPolicy) {
		settles(p)
		inFlight(p)
		p.Spec.Match.Envoy = &v1alpha1.EnvoyMatch{Domain: "edge"}
	}},

	// Updates that orphan the live counters.
	{name: "algorithm change on update", old: unchanged,
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.Algorithm = v1alpha1.AlgorithmGCRA },
		want:   [][]string{{"spec.algorithm: changing TokenBucket to GCRA orphans the live counters", "full quota"}}},
	{name: "key layout change on update", old: unchanged,
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${namespace}/v2:${identity}}:${limit}", "", 0) },
		want: [][]string{{`spec.keyLayout: changing the state key from "{rl:${namespace}/${policy}:${identity}}:${limit}" to "{rl:${namespace}/v2:${identity}}:${limit}"`,
			"orphans the live counters"}}},
	{name: "algorithm change keeps the default layout", old: unchanged,
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			sliding(p)
		},
		want: [][]string{{"spec.algorithm: changing TokenBucket to SlidingWindow"}}},
	{name: "unrelated change on update", old: unchanged,
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Limits[0].Requests = 50
			p.Spec.Match.HTTP[0].PathPrefixes = append(p.Spec.Match.HTTP[0].PathPrefixes, "/v2")
			p.Spec.FailureMode = v1alpha1.FailureModeFailClosed
		}},
	{name: "no change on update", old: unchanged, mutate: unchanged},
	{name: "algorithm change and FailOpen on /login on update", old: onPaths(v1alpha1.FailureModeFailOpen, "/login"),
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			onPaths(v1alpha1.FailureModeFailOpen, "/login")(p)
			p.Spec.Algorithm = v1alpha1.AlgorithmGCRA
		},
		want: [][]string{{`FailOpen admits every request to "/login"`}, {"spec.algorithm: changing TokenBucket to GCRA"}}},
}

// settles has p's cost settle from the response's usage.total_tokens.
func settles(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Cost = &v1alpha1.Cost{Default: 100, Settle: &v1alpha1.CostSettle{Field: "usage.total_tokens"}}
}

// inFlight limits p to 3 requests in flight per caller.
func inFlight(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Concurrency = &v1alpha1.Concurrency{Max: 3}
}

// TestWarnings checks the admitted-but-told remarks on defaulted policies.
func TestWarnings(t *testing.T) {
	for _, tc := range warningCases {
		t.Run(tc.name, func(t *testing.T) {
			var old *v1alpha1.RateLimitPolicy
			if tc.old != nil {
				old = base()
				tc.old(old)
				(policy.Rules{}).Default(old)
			}
			p := base()
			tc.mutate(p)
			(policy.Rules{}).Default(p)
			if _, errs := (policy.Rules{}).CompileAsIs(p); len(errs) > 0 {
				t.Fatalf("warning case must be a valid policy:\n%s", list(errs))
			}
			assertWarnings(t, policy.Warnings(old, p), tc.want)
		})
	}
}

// assertWarnings checks that each want entry matches its own warning and nothing else warns.
func assertWarnings(t *testing.T, got []string, want [][]string) {
	t.Helper()
	used := make([]bool, len(got))
	for _, frags := range want {
		found := false
		for i, w := range got {
			if !used[i] && containsAll(w, frags) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("no warning containing all of %q; got %q", frags, got)
		}
	}
	for i, w := range got {
		if !used[i] {
			t.Errorf("unexpected warning: %s", w)
		}
	}
}

// TestWarningsNameTheField: every warning starts with its field path, so kubectl users see where to look.
func TestWarningsNameTheField(t *testing.T) {
	old := base()
	(policy.Rules{}).Default(old)
	p := base()
	onPaths(v1alpha1.FailureModeFailOpen, "/login")(p)
	p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
	p.Spec.Limits[0].Burst = nil
	layout(p, sharedTag, "", time.Minute)
	(policy.Rules{}).Default(p)
	w := policy.Warnings(old, p)
	if len(w) != 4 {
		t.Fatalf("want 4 warnings (hot slot, FailOpen, algorithm, layout), got %q", w)
	}
	for _, s := range w {
		if !strings.HasPrefix(s, "spec.") {
			t.Errorf("warning does not start with its field path: %s", s)
		}
	}
}
