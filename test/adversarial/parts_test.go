package adversarial

import (
	"net/http"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
)

// partsLimit is what each combination of compositePolicy's parts may spend per hour.
const partsLimit = 6

// compositePolicy counts each combination of API key, route (the matched path prefix) and
// method apart: partsLimit per hour each, on /orders and /users.
func compositePolicy(alg v1alpha1.Algorithm, edits ...func(*v1alpha1.RateLimitPolicySpec)) *v1alpha1.RateLimitPolicy {
	parts := func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/orders", "/users"}}}
		s.Identity.Sources = nil
		s.Identity.Parts = []v1alpha1.IdentityPart{
			{Sources: v1alpha1.IdentitySources{{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}}}},
			{Sources: v1alpha1.IdentitySources{{Type: v1alpha1.IdentityPathPrefix}}},
			{Sources: v1alpha1.IdentitySources{{Type: v1alpha1.IdentityMethod}}},
		}
	}
	return newPolicy("combos", alg, partsLimit, time.Hour, append([]func(*v1alpha1.RateLimitPolicySpec){parts}, edits...)...)
}

// combo is one combination a test spends: the path selects the route part.
type combo struct{ key, path string }

// Class: over-admission through a composite identity. Many concurrent requests of each
// combination are admitted exactly to the limit, and a combination that shares a key or a
// route with a spent one still has its whole limit: they count apart. Keys holding the
// encoding's own separators, spelling another combination's parts, spend only their own.
func TestCompositeIdentityAdmitsExactlyPerCombination(t *testing.T) {
	combos := []combo{
		{"k1", "/orders/1"}, {"k1", "/users/1"}, {"k2", "/orders/1"},
		// Would collide under a naive "key|route" or "key+route" join.
		{"k1+7./orders+3.GET", "/users"}, {"k1|/orders", "/users"}, {"1.k1", "/orders/2"},
	}
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, limiter.Options{}, compositePolicy(alg))
			for _, c := range combos {
				got := r.hammer(8, 8, c.path, []string{"X-API-Key", c.key}, nil)
				onlyAdmitOrDeny(t, got)
				if got[http.StatusOK] != partsLimit {
					t.Errorf("%q on %s: %d of 64 concurrent requests admitted, want exactly %d (over-admission %d)",
						c.key, c.path, got[http.StatusOK], partsLimit, got[http.StatusOK]-partsLimit)
				}
			}
			// The method is a part: POST on a spent GET combination has its own limit.
			if got := r.count(partsLimit+2, http.MethodPost, "/orders/1", "X-API-Key", "k1"); got != partsLimit {
				t.Errorf("POST after GET was spent: %d of %d admitted, want %d", got, partsLimit+2, partsLimit)
			}
			// onMissing Reject: a request without the key part is refused, whatever its route.
			if got := r.send(http.MethodGet, "/orders/1"); got == http.StatusOK {
				t.Errorf("no API key: %d, want a refusal", got)
			}
		})
	}
}

// The same with leases, the identities served from them as soon as they are hot: leases
// never add to a combination's limit, and each combination leases its own units.
func TestCompositeIdentityWithLeases(t *testing.T) {
	leases := func(s *v1alpha1.RateLimitPolicySpec) { s.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOn} }
	r := newRig(t, limiter.Options{Leases: limiter.LeaseOptions{HotRate: 1}}, compositePolicy(v1alpha1.AlgorithmFixedWindow, leases))
	for _, c := range []combo{{"k1", "/orders/1"}, {"k1", "/users/1"}, {"k2", "/orders/1"}} {
		got := r.hammer(8, 8, c.path, []string{"X-API-Key", c.key}, nil)
		onlyAdmitOrDeny(t, got)
		if n := got[http.StatusOK]; n > partsLimit || n < partsLimit/2 {
			t.Errorf("%q on %s with leases: %d of 64 admitted, want at most %d (never over) and most of it", c.key, c.path, n, partsLimit)
		}
	}
}

// A composite every caller shares (route and method), spread over shards: each route's
// limit is admitted exactly, never more, though each request asks a shard at random.
func TestCompositeIdentityOverShards(t *testing.T) {
	const limit = 8
	shared := func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity.Parts = s.Identity.Parts[1:] // route and method
		s.Limits[0].Requests = limit
		s.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](2)}
	}
	r := newRig(t, limiter.Options{}, compositePolicy(v1alpha1.AlgorithmFixedWindow, shared))
	for _, path := range []string{"/orders/1", "/users/9"} {
		got := r.hammer(8, 8, path, []string{"X-API-Key", "anyone"}, nil)
		onlyAdmitOrDeny(t, got)
		if got[http.StatusOK] != limit {
			t.Errorf("%s over 2 shards: %d of 64 admitted, want exactly %d", path, got[http.StatusOK], limit)
		}
	}
}

// The check API states a composite identity's parts; the same values spend the same
// counter as the proxy's requests, and a policy's parts must be stated in full.
func TestCheckAPICompositeIdentity(t *testing.T) {
	r := newRig(t, limiter.Options{}, compositePolicy(v1alpha1.AlgorithmGCRA))
	if got := r.count(2, http.MethodGet, "/orders/1", "X-API-Key", "k1"); got != 2 {
		t.Fatalf("proxy: %d of 2 admitted", got)
	}
	got := r.checkAPI(t, checkwire.Request{Policy: "combos", Parts: []string{"k1", "/orders", "GET"}})
	if !got.Allowed || got.Remaining != partsLimit-3 {
		t.Errorf("check API after 2 proxied requests of the combination: %+v, want allowed with %d remaining", got, partsLimit-3)
	}
	if got := r.checkAPI(t, checkwire.Request{Policy: "combos", Parts: []string{"k1", "/users", "GET"}}); got.Remaining != partsLimit-1 {
		t.Errorf("another route: remaining %d, want %d", got.Remaining, partsLimit-1)
	}
	if got := r.checkAPI(t, checkwire.Request{Policy: "combos", Parts: []string{"k1", "", "GET"}}); got.Result != "rejected" {
		t.Errorf("a missing part under onMissing Reject: %+v, want rejected", got)
	}
	for _, bad := range []checkwire.Request{
		{Policy: "combos", Identity: "k1"},
		{Policy: "combos", Parts: []string{"k1", "/orders"}},
	} {
		if status := r.checkStatus(t, bad); status != http.StatusBadRequest {
			t.Errorf("%+v: %d, want 400", bad, status)
		}
	}
}
