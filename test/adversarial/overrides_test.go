package adversarial

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// ownLimit is what an override with limits of its own gives its callers.
const ownLimit = 12

// override is a RateLimitOverride of tieredPolicy's "plans" for callers, edited by edits.
func override(name string, callers []v1alpha1.OverrideCaller, edits ...func(*v1alpha1.RateLimitOverrideSpec)) *v1alpha1.RateLimitOverride {
	o := &v1alpha1.RateLimitOverride{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RateLimitOverrideSpec{PolicyName: "plans", Callers: callers, Tier: "pro"}}
	for _, e := range edits {
		e(&o.Spec)
	}
	return o
}

// byValue and byHash name a caller as an override does.
func byValue(v string) v1alpha1.OverrideCaller { return v1alpha1.OverrideCaller{Value: v} }

func byHash(identity string) v1alpha1.OverrideCaller {
	return v1alpha1.OverrideCaller{Hash: snapshot.IdentityHash(identity)}
}

// ownLimits gives an override's callers ownLimit per hour on the policy's counter.
func ownLimits(s *v1alpha1.RateLimitOverrideSpec) {
	s.Tier = ""
	s.Limits = []v1alpha1.Limit{{Name: "limit", Requests: ownLimit, Period: metav1.Duration{Duration: time.Hour}}}
}

// loadOverrides publishes policies with overrides to r as the controller does, and returns
// the document.
func (r *rig) loadOverrides(policies []*v1alpha1.RateLimitPolicy, overrides ...*v1alpha1.RateLimitOverride) []byte {
	r.t.Helper()
	s := snapshottest.WithOverrides(r.t, snapshottest.BuildFor(r.t, ns, r.topology, policies...), overrides...)
	doc, err := s.Marshal()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.store.Load(doc, "test"); err != nil {
		r.t.Fatal(err)
	}
	return doc
}

// Class: over-admission through overrides. Callers raised by an override (to a tier, or to
// limits of their own; named by value or by hash) are admitted exactly to what it gives them
// under concurrency, and every other caller keeps its tier's limit, on every algorithm.
func TestOverridesAdmitExactlyTheirLimitsUnderConcurrency(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			p := tieredPolicy(alg)
			r := newRig(t, limiter.Options{}, p)
			r.loadOverrides([]*v1alpha1.RateLimitPolicy{p},
				override("launch-week", []v1alpha1.OverrideCaller{byValue("vip-a"), byHash("vip-h")}),
				override("custom", []v1alpha1.OverrideCaller{byValue("vip-own")}, ownLimits))
			for caller, want := range map[string]int{"vip-a": proLimit, "vip-h": proLimit, "vip-own": ownLimit, "free-a": freeLimit} {
				got := r.hammer(16, 4, "/", []string{"X-API-Key", caller}, nil)
				onlyAdmitOrDeny(t, got)
				if got[http.StatusOK] != want {
					t.Errorf("%s: %d of 64 concurrent requests admitted, want exactly %d (over-admission %d)",
						caller, got[http.StatusOK], want, got[http.StatusOK]-want)
				}
			}
		})
	}
}

// Class: claiming another caller's override. With several identity sources an override's
// value is the value of one source: a caller whose address is an overridden API key is not
// overridden, nor one sending a condition's header to the same effect through another
// source's value.
func TestOverrideCannotBeClaimedThroughAnotherSource(t *testing.T) {
	p := tieredPolicy(v1alpha1.AlgorithmFixedWindow)
	p.Spec.Identity.Sources = append(p.Spec.Identity.Sources, v1alpha1.IdentitySource{Type: v1alpha1.IdentityClientIP})
	p.Spec.Identity.OnMissing = v1alpha1.MissingIdentityShared
	r := newRig(t, limiter.Options{}, p)
	r.loadOverrides([]*v1alpha1.RateLimitPolicy{p}, override("vip", []v1alpha1.OverrideCaller{byValue("127.0.0.1")}))
	// The test's client connects from 127.0.0.1 without an API key: source 1, not source 0.
	if got := r.count(freeLimit+3, http.MethodGet, "/"); got != freeLimit {
		t.Errorf("the caller at 127.0.0.1, whose address is an overridden API key: %d of %d admitted, want %d (the free limit)", got, freeLimit+3, freeLimit)
	}
	if got := r.count(proLimit+3, http.MethodGet, "/", "X-API-Key", "127.0.0.1"); got != proLimit {
		t.Errorf("the overridden API key: %d of %d admitted, want %d", got, proLimit+3, proLimit)
	}
}

// A credential never lands in a snapshot: an override's callers named by value are
// published as hashes only.
func TestOverrideValuesNeverInSnapshot(t *testing.T) {
	p := tieredPolicy(v1alpha1.AlgorithmGCRA)
	r := newRig(t, limiter.Options{}, p)
	secret := "sk-live-4f9c1d2e8a7b6c5d"
	doc := r.loadOverrides([]*v1alpha1.RateLimitPolicy{p}, override("vip", []v1alpha1.OverrideCaller{byValue(secret)}))
	if bytes.Contains(doc, []byte(secret)) || bytes.Contains(doc, []byte("4f9c1d2e8a7b")) {
		t.Fatalf("the snapshot holds the caller's API key: %s", doc)
	}
	if !bytes.Contains(doc, []byte(snapshot.IdentityHash(secret))) {
		t.Fatalf("the snapshot does not name the caller by its hash %s", snapshot.IdentityHash(secret))
	}
	if got := r.count(proLimit+1, http.MethodGet, "/", "X-API-Key", secret); got != proLimit {
		t.Errorf("the overridden caller: %d admitted, want %d", got, proLimit)
	}
}

// An override with an expiry applies until then, and its callers' own tier afterwards,
// keeping what they used (issue 28, item 4): a caller raised to proLimit that used more than
// freeLimit is denied once the override expires, until its window refills.
func TestOverrideExpiryKeepsUsage(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			p := tieredPolicy(alg)
			r := newRig(t, limiter.Options{}, p)
			expires := metav1.NewTime(time.Now().Add(1500 * time.Millisecond))
			r.loadOverrides([]*v1alpha1.RateLimitPolicy{p}, override("week", []v1alpha1.OverrideCaller{byValue("vip")},
				func(s *v1alpha1.RateLimitOverrideSpec) { s.Expires = &expires }))
			if got := r.count(freeLimit+2, http.MethodGet, "/", "X-API-Key", "vip"); got != freeLimit+2 {
				t.Fatalf("while overridden: %d of %d admitted", got, freeLimit+2)
			}
			time.Sleep(time.Until(expires.Time) + 50*time.Millisecond)
			if got := r.count(freeLimit, http.MethodGet, "/", "X-API-Key", "vip"); got != 0 {
				t.Errorf("after the override expired, having used %d of the free %d: %d of %d admitted, want 0", freeLimit+2, freeLimit, got, freeLimit)
			}
		})
	}
}

// The check API applies overrides to the identity it is given: a check and a plan question
// for an overridden caller answer with the override's tier, beating the conditions of the
// request described, and a tier named in the request beats both.
func TestCheckAPIOverrides(t *testing.T) {
	p := tieredPolicy(v1alpha1.AlgorithmGCRA)
	r := newRig(t, limiter.Options{}, p)
	r.loadOverrides([]*v1alpha1.RateLimitPolicy{p}, override("vip", []v1alpha1.OverrideCaller{byValue("vip")}),
		override("own", []v1alpha1.OverrideCaller{byValue("own")}, ownLimits))
	free := &checkwire.Attributes{Headers: map[string]string{"X-Plan": "free"}}
	for _, tc := range []struct {
		req   checkwire.Request
		tier  string
		quota int64
	}{
		{checkwire.Request{Policy: "plans", Identity: "vip"}, "pro", proLimit},
		{checkwire.Request{Policy: "plans", Identity: "vip", Request: free}, "pro", proLimit},
		{checkwire.Request{Policy: "plans", Identity: "own", Request: free}, "override/own", ownLimit},
		{checkwire.Request{Policy: "plans", Identity: "own", Tier: "default"}, "default", freeLimit},
		{checkwire.Request{Policy: "plans", Identity: "nobody"}, "default", freeLimit},
	} {
		if got := r.checkAPI(t, tc.req); got.Tier != tc.tier || got.Quota != tc.quota || !got.Allowed {
			t.Errorf("check %+v: tier %q quota %d allowed %v, want %q %d true", tc.req, got.Tier, got.Quota, got.Allowed, tc.tier, tc.quota)
		}
		if plan := r.planAPI(t, tc.req); plan.Tier != tc.tier || len(plan.Limits) != 1 || plan.Limits[0].Requests != tc.quota {
			t.Errorf("plan %+v: %+v, want tier %q with %d requests", tc.req, plan, tc.tier, tc.quota)
		}
	}
}
