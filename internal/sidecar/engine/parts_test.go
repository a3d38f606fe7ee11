package engine_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

var (
	keyHeader  = v1alpha1.IdentitySource{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}}
	methodSrc  = v1alpha1.IdentitySource{Type: v1alpha1.IdentityMethod}
	prefixSrc  = v1alpha1.IdentitySource{Type: v1alpha1.IdentityPathPrefix}
	tenantJWT  = v1alpha1.IdentitySource{Type: v1alpha1.IdentityJWTClaim, JWTClaim: &v1alpha1.JWTClaimSource{Claim: "tenant"}}
	clientAddr = v1alpha1.IdentitySource{Type: v1alpha1.IdentityClientIP, ClientIP: &v1alpha1.ClientIPSource{IPv4PrefixLength: 24, IPv6PrefixLength: 64}}
)

// planned is the check PlanHTTP reads for the one policy method target matches.
func planned(t *testing.T, set *engine.Set, method, target string, h http.Header) engine.Check {
	t.Helper()
	path, query, err := requestread.ParseTarget(method, target)
	if err != nil {
		t.Fatal(err)
	}
	rules, checks, err := set.PlanHTTP(&requestread.HTTPRequest{Method: method, Host: "shop.example", Path: path, Query: query, Header: h, Peer: "10.1.2.3:4000"})
	if err != nil || len(rules) != 1 {
		t.Fatalf("%s %s: %d rules, %v; want one", method, target, len(rules), err)
	}
	return checks[0]
}

// TestCompositeIdentityHTTP: each part reads its own chain; the identity is their
// combination, each value written with its length; Method is the method the upstream runs
// (override, HEAD as GET, OTHER for the rest) and PathPrefix the longest prefix of the
// matching entries as the policy wrote it, never the request's own path.
func TestCompositeIdentityHTTP(t *testing.T) {
	set := sidecartest.Set(t, sidecartest.Policy("p", 5,
		sidecartest.Parts(v1alpha1.MissingIdentityShared, sidecartest.Part(keyHeader, tenantJWT, clientAddr), sidecartest.Part(prefixSrc), sidecartest.Part(methodSrc)),
		func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{
				{PathPrefixes: []string{"/API/Orders/", "/api/users"}},
				{PathPrefixes: []string{"/api/orders/export"}, Methods: []v1alpha1.HTTPMethod{"POST"}},
				{Hosts: []string{"admin.example"}},
			}
		}))
	for _, tc := range []struct {
		method, target string
		h              http.Header
		want           string
	}{
		{"GET", "/api/orders/7", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+11./api/orders+3.GET"},
		{"get", "/api/users", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+10./api/users+3.GET"},
		{"HEAD", "/api/orders", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+11./api/orders+3.GET"},
		// The longer prefix of an entry whose method matches; GET's entry has only the shorter.
		{"POST", "/api/orders/export/x", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+18./api/orders/export+4.POST"},
		{"GET", "/api/orders/export/x", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+11./api/orders+3.GET"},
		// The upstream runs the override: that is the method counted.
		{"POST", "/api/orders/export", sidecartest.Header("X-API-Key", "k1", "X-HTTP-Method-Override", "delete"), "4.0=k1+18./api/orders/export+6.DELETE"},
		{"PROPFIND", "/api/users/1", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+10./api/users+5.OTHER"},
		{"BREW", "/api/users/1", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+10./api/users+5.OTHER"},
		// The chain of the first part falls back as a chain of sources does, keeping its sources apart.
		{"GET", "/api/users", sidecartest.Header("Authorization", sidecartest.JWT(`{"tenant":"t9"}`)), "4.1=t9+10./api/users+3.GET"},
		{"GET", "/api/users", sidecartest.Header(), "10.2=10.1.2.0+10./api/users+3.GET"},
		// Path parameters and case do not make another prefix: the policy's text does.
		{"GET", "/API/Users;jsessionid=1/x", sidecartest.Header("X-API-Key", "k1"), "4.0=k1+10./api/users+3.GET"},
	} {
		c := planned(t, set, tc.method, tc.target, tc.h)
		if !c.HasIdentity || c.Identity != tc.want {
			t.Errorf("%s %s %v: identity %q (%v), want %q", tc.method, tc.target, tc.h, c.Identity, c.HasIdentity, tc.want)
		}
	}
	// An entry naming no prefix (admin.example's) makes the part "/".
	path, _, err := requestread.ParseTarget("GET", "/anything")
	if err != nil {
		t.Fatal(err)
	}
	_, checks, err := set.PlanHTTP(&requestread.HTTPRequest{Method: "GET", Host: "Admin.Example:443", Path: path, Header: sidecartest.Header("X-API-Key", "k1")})
	if err != nil || len(checks) != 1 || checks[0].Identity != "4.0=k1+1./+3.GET" {
		t.Errorf("an entry without prefixes: %+v, %v; want the part /", checks, err)
	}
	// HTTPCheck alone has no request line: Method and PathPrefix yield nothing there.
	c, err := set.Rule("p").HTTPCheck(sidecartest.Header("X-API-Key", "k1"), "")
	if err != nil || c.Identity != "4.0=k1+-+-" {
		t.Errorf("HTTPCheck without the request line: %+v, %v", c, err)
	}
}

// TestCompositeIdentityDescriptor: on the Envoy front each part reads descriptor entries
// (or its Fixed fallback); Method and PathPrefix, which need an HTTP request, yield nothing.
func TestCompositeIdentityDescriptor(t *testing.T) {
	user := v1alpha1.IdentitySource{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "user"}}
	route := v1alpha1.IdentitySource{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "path"}}
	anyRoute := v1alpha1.IdentitySource{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "any"}}
	set := sidecartest.Set(t,
		sidecartest.EnvoyPolicy("rls", "orders", 5, 1e9, sidecartest.Parts(v1alpha1.MissingIdentityReject, sidecartest.Part(user), sidecartest.Part(route, anyRoute))),
		sidecartest.EnvoyPolicy("both", "users", 5, 1e9, sidecartest.Parts(v1alpha1.MissingIdentityShared, sidecartest.Part(user), sidecartest.Part(methodSrc)),
			func(s *v1alpha1.RateLimitPolicySpec) {
				s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/both"}}}
			}),
	)
	e := func(kv ...string) []requestread.DescriptorEntry {
		var out []requestread.DescriptorEntry
		for i := 0; i < len(kv); i += 2 {
			out = append(out, requestread.DescriptorEntry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		policy  string
		entries []requestread.DescriptorEntry
		want    string
		ok      bool
	}{
		{"rls", e("route", "orders", "user", "u1", "path", "/a+1.b"), "2.u1+8.0=/a+1.b", true},
		{"rls", e("route", "orders", "user", "u1"), "2.u1+5.1=any", true},
		{"rls", e("route", "orders", "path", "/a"), "", false},
		{"both", e("route", "users", "user", "u1"), "2.u1+-", true},
	} {
		c, err := set.Rule(tc.policy).DescriptorCheck(sidecartest.EnvoyDomain, tc.entries, 0)
		if err != nil || c.Identity != tc.want || c.HasIdentity != tc.ok {
			t.Errorf("%s %v: %q (%v), %v; want %q (%v)", tc.policy, tc.entries, c.Identity, c.HasIdentity, err, tc.want, tc.ok)
		}
	}
}

// TestCompositeIdentityRefusedShapes: a snapshot entry whose identity a sidecar cannot read
// as one shape (sources and parts both, or more parts than the API allows) is refused on its
// own when loaded; the other policies of the snapshot load.
func TestCompositeIdentityRefusedShapes(t *testing.T) {
	for name, edit := range map[string]func(*snapshot.Identity){
		"sources and parts": func(id *snapshot.Identity) {
			id.Sources = []snapshot.IdentitySource{{Type: snapshot.SourceHeader, Header: &snapshot.HeaderSource{Name: "X-A"}}}
		},
		"five parts": func(id *snapshot.Identity) {
			for len(id.Parts) < 5 {
				id.Parts = append(id.Parts, id.Parts[0])
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			doc := sidecartest.Doc(t, sidecartest.Policy("bad", 5, sidecartest.Parts("", sidecartest.Part(keyHeader), sidecartest.Part(methodSrc))), sidecartest.Policy("good", 5))
			s, err := snapshot.Parse(doc)
			if err != nil {
				t.Fatal(err)
			}
			edit(&s.Policies[slices.IndexFunc(s.Policies, func(e snapshot.Entry) bool { return e.Name == "bad" })].Identity)
			var logged strings.Builder
			store := &engine.Store{Namespace: sidecartest.Namespace,
				Log: funcr.New(func(_, args string) { logged.WriteString(args + "\n") }, funcr.Options{})}
			err = store.Load(sidecartest.Reseal(t, s), "test")
			set := store.Current()
			if err != nil || set == nil || set.Rule("good") == nil || set.Rule("bad") != nil {
				t.Fatalf("load: %v; want bad refused and good loaded", err)
			}
			if !strings.Contains(logged.String(), `policy \"bad\": identity:`) || !strings.Contains(logged.String(), "at most 4 parts") {
				t.Errorf("the refusal logged %s; want one naming the policy's parts", logged.String())
			}
		})
	}
}
