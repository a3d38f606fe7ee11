package policy_test

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

var (
	methodSource = v1alpha1.IdentitySource{Type: v1alpha1.IdentityMethod}
	prefixSource = v1alpha1.IdentitySource{Type: v1alpha1.IdentityPathPrefix}
	fixedSource  = v1alpha1.IdentitySource{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}
	userEntry    = v1alpha1.IdentitySource{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "user"}}
)

// parts makes the base policy's identity the composite of parts, each a chain of sources.
func parts(chains ...[]v1alpha1.IdentitySource) func(*v1alpha1.RateLimitPolicy) {
	return func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Identity.Sources = nil
		p.Spec.Identity.Parts = nil
		for _, c := range chains {
			p.Spec.Identity.Parts = append(p.Spec.Identity.Parts, v1alpha1.IdentityPart{Sources: c})
		}
	}
}

func chain(s ...v1alpha1.IdentitySource) []v1alpha1.IdentitySource { return s }

// envoyOnly matches Envoy descriptors only: no HTTP request to read.
func envoyOnly(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Match = v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: "edge"}}
}

// TestIdentityRefused: the identities no front can read are refused naming the source (or
// the part) at fault, also those the CRD schema refuses too (a stored object may predate
// a schema rule).
func TestIdentityRefused(t *testing.T) {
	key := policytest.Header("X-API-Key")
	for _, tc := range []rejectCase{
		{name: "Method part without an HTTP match", mutate: func(p *v1alpha1.RateLimitPolicy) {
			parts(chain(userEntry), chain(methodSource))(p)
			envoyOnly(p)
		}, field: "spec.identity.parts[1].sources[0]", msgs: []string{"Method needs match.http or targetRefs", "Envoy RLS front never sees"}},
		{name: "PathPrefix fallback without an HTTP match", mutate: func(p *v1alpha1.RateLimitPolicy) {
			parts(chain(userEntry), chain(userEntry, prefixSource))(p)
			envoyOnly(p)
		}, field: "spec.identity.parts[1].sources[1]", msgs: []string{"PathPrefix needs match.http"}},
		{name: "Method source without an HTTP match", mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Identity.Sources = []v1alpha1.IdentitySource{userEntry, methodSource}
			envoyOnly(p)
		}, field: "spec.identity.sources[1]", msgs: []string{"Method needs match.http"}},
		{name: "Descriptor part without an Envoy match", mutate: parts(chain(key), chain(userEntry)),
			field: "spec.identity.parts[1].sources[0]", msgs: []string{"Descriptor needs match.envoy"}},
		{name: "sources and parts", mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Identity.Parts = []v1alpha1.IdentityPart{{Sources: chain(key)}, {Sources: chain(methodSource)}}
		}, field: "spec.identity", msgs: []string{"exactly one of sources", "parts"}},
		{name: "neither sources nor parts", mutate: parts(),
			field: "spec.identity.sources", msgs: []string{"or parts"}},
		{name: "every part Fixed", mutate: parts(chain(fixedSource), chain(fixedSource)),
			field: "spec.identity.parts", msgs: []string{"every part is Fixed"}},
		{name: "shards on a per-caller composite", mutate: func(p *v1alpha1.RateLimitPolicy) {
			parts(chain(key), chain(methodSource))(p)
			p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](2)}
		}, field: "spec.hotKeys.shards", msgs: []string{"Fixed, Method or PathPrefix", "every part"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mutate(p)
			if !tc.raw {
				(policy.Rules{}).Default(p)
			}
			_, errs := (policy.Rules{}).CompileAsIs(p)
			assertErrors(t, errs, tc.field, tc.msgs, tc.also...)
		})
	}
}

// TestIdentityPartsCompile: a composite identity converts to the wire format part by part,
// with Method and PathPrefix on an HTTP match or targetRefs, a Fixed fallback within a part,
// and shards over a composite every caller shares (route and method).
func TestIdentityPartsCompile(t *testing.T) {
	key := policytest.Header("X-API-Key")
	for name, mutate := range map[string]func(*v1alpha1.RateLimitPolicy){
		"key and route":                   parts(chain(key), chain(prefixSource)),
		"key or anonymous, method, route": parts(chain(key, fixedSource), chain(methodSource), chain(prefixSource)),
		"route and method over shards": func(p *v1alpha1.RateLimitPolicy) {
			parts(chain(prefixSource), chain(methodSource))(p)
			p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](2), Leases: v1alpha1.LeaseModeOn}
		},
		"descriptor parts on Envoy": func(p *v1alpha1.RateLimitPolicy) {
			parts(chain(userEntry), chain(v1alpha1.IdentitySource{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "route"}}))(p)
			envoyOnly(p)
		},
		"method part on targetRefs": func(p *v1alpha1.RateLimitPolicy) {
			parts(chain(key), chain(methodSource))(p)
			p.Spec.Match = v1alpha1.Match{}
			p.Spec.TargetRefs = []v1alpha1.TargetRef{{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Name: "shop"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := base()
			mutate(p)
			c, errs := (policy.Rules{}).Compile(p)
			if len(errs) > 0 {
				t.Fatalf("refused:\n%s", list(errs))
			}
			id := c.Entry.Identity
			if len(id.Sources) != 0 || len(id.Parts) != len(p.Spec.Identity.Parts) {
				t.Fatalf("entry identity %+v, want the %d parts and no sources", id, len(p.Spec.Identity.Parts))
			}
			for i, part := range p.Spec.Identity.Parts {
				for j, s := range part.Sources {
					if got := id.Parts[i].Sources[j].Type; got != string(s.Type) {
						t.Errorf("parts[%d].sources[%d]: %s, want %s", i, j, got, s.Type)
					}
				}
			}
			if id.OnMissing != snapshot.MissingShared {
				t.Errorf("onMissing %q, want the default Shared", id.OnMissing)
			}
		})
	}
}

// TestIdentityPartsSkipWarning: Skip warns about the first part a caller can leave out, and
// not when every part always yields a value.
func TestIdentityPartsSkipWarning(t *testing.T) {
	key := policytest.Header("X-API-Key")
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.RateLimitPolicy)
		want   [][]string
	}{
		{"route then key", parts(chain(prefixSource), chain(key)), [][]string{{"spec.identity.onMissing: Skip", "spec.identity.parts[1]"}}},
		{"key with a fallback, method", parts(chain(key, fixedSource), chain(methodSource)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mutate(p)
			p.Spec.Identity.OnMissing = v1alpha1.MissingIdentitySkip
			(policy.Rules{}).Default(p)
			if _, errs := (policy.Rules{}).CompileAsIs(p); len(errs) > 0 {
				t.Fatalf("must be a valid policy:\n%s", list(errs))
			}
			assertWarnings(t, policy.Warnings(nil, p), tc.want)
		})
	}
}
