package attachment

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

const ns = "shop"

// gateway is the Gateway "gw" with one listener per hostname.
func gateway(hosts ...string) gwapiv1.Gateway {
	g := gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}}
	for _, h := range hosts {
		hn := gwapiv1.Hostname(h)
		g.Spec.Listeners = append(g.Spec.Listeners, gwapiv1.Listener{Name: gwapiv1.SectionName("l-" + h), Hostname: &hn})
	}
	return g
}

// httpRoute is a route on the Gateway "gw".
func httpRoute(name string, hosts []string, rules ...gwapiv1.HTTPRouteRule) gwapiv1.HTTPRoute {
	r := gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: "gw"}}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwapiv1.Hostname(h))
	}
	r.Spec.Rules = rules
	return r
}

func pathRule(typ gwapiv1.PathMatchType, path string, method string) gwapiv1.HTTPRouteRule {
	m := gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Type: &typ, Value: &path}}
	if method != "" {
		hm := gwapiv1.HTTPMethod(method)
		m.Method = &hm
	}
	return gwapiv1.HTTPRouteRule{Matches: []gwapiv1.HTTPRouteMatch{m}}
}

func attached(name string, age int, precedence v1alpha1.Precedence, kind, target string) v1alpha1.RateLimitPolicy {
	p := v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000-int64(age), 0))}}
	p.Spec.TargetRefs = []v1alpha1.TargetRef{{Group: gwapiv1.GroupName, Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(target)}}
	p.Spec.Precedence = precedence
	return p
}

func ancestor(t *testing.T, r *Result, name string) Ancestor {
	t.Helper()
	for _, a := range r.Ancestors {
		if string(a.Ref.Name) == name {
			return a
		}
	}
	t.Fatalf("no ancestor %s in %+v", name, r.Ancestors)
	return Ancestor{}
}

// TestRouteDerivesMatch: a route policy governs exactly the route's hostnames, path
// prefixes (Exact as a prefix) and methods; a route without hostnames takes its listeners'.
func TestRouteDerivesMatch(t *testing.T) {
	in := Inputs{Namespace: ns, Gateways: []gwapiv1.Gateway{gateway("b.example.com")}, HTTPRoutes: []gwapiv1.HTTPRoute{
		httpRoute("a", []string{"a.example.com"}, pathRule(gwapiv1.PathMatchPathPrefix, "/api", "POST"),
			pathRule(gwapiv1.PathMatchExact, "/login", "")),
		httpRoute("b", nil, gwapiv1.HTTPRouteRule{}),
	}}
	got := Resolve(in, []v1alpha1.RateLimitPolicy{attached("pa", 2, "", "HTTPRoute", "a"), attached("pb", 1, "", "HTTPRoute", "b")})
	want := []v1alpha1.HTTPMatch{
		{Hosts: []string{"a.example.com"}, PathPrefixes: []string{"/api"}, Methods: []v1alpha1.HTTPMethod{"POST"}},
		{Hosts: []string{"a.example.com"}, PathPrefixes: []string{"/login"}},
	}
	if !reflect.DeepEqual(got["pa"].Matches, want) {
		t.Errorf("pa matches %+v, want %+v", got["pa"].Matches, want)
	}
	if want := []v1alpha1.HTTPMatch{{Hosts: []string{"b.example.com"}, PathPrefixes: []string{"/"}}}; !reflect.DeepEqual(got["pb"].Matches, want) {
		t.Errorf("pb matches %+v, want %+v", got["pb"].Matches, want)
	}
	if a := ancestor(t, got["pa"], "gw"); !a.Accepted.OK || !a.Enforced.OK {
		t.Errorf("pa ancestor gw: %+v", a)
	}
}

// TestDefaultsAndOverrides: a Gateway's defaults govern the routes without a policy and
// yield to a route policy; an overrides policy takes every route from both.
func TestDefaultsAndOverrides(t *testing.T) {
	in := Inputs{Namespace: ns, Gateways: []gwapiv1.Gateway{gateway()}, HTTPRoutes: []gwapiv1.HTTPRoute{
		httpRoute("a", []string{"a.example.com"}, gwapiv1.HTTPRouteRule{}),
		httpRoute("b", []string{"b.example.com"}, gwapiv1.HTTPRouteRule{}),
	}}
	policies := []v1alpha1.RateLimitPolicy{attached("defaults", 3, "", "Gateway", "gw"), attached("route-a", 2, "", "HTTPRoute", "a")}
	got := Resolve(in, policies)
	if h := got["defaults"].Matches; len(h) != 1 || h[0].Hosts[0] != "b.example.com" {
		t.Errorf("defaults govern %+v, want only route b", h)
	}
	if h := got["route-a"].Matches; len(h) != 1 || h[0].Hosts[0] != "a.example.com" {
		t.Errorf("route-a governs %+v, want route a", h)
	}
	got = Resolve(in, append(policies, attached("overrides", 1, v1alpha1.PrecedenceOverrides, "Gateway", "gw")))
	if len(got["overrides"].Matches) != 2 || len(got["route-a"].Matches) != 0 || len(got["defaults"].Matches) != 0 {
		t.Errorf("with overrides: overrides %+v, route-a %+v, defaults %+v", got["overrides"].Matches, got["route-a"].Matches, got["defaults"].Matches)
	}
	if a := ancestor(t, got["route-a"], "gw"); !a.Accepted.OK || a.Enforced.OK || a.Enforced.Reason != v1alpha1.ReasonOverridden {
		t.Errorf("route-a ancestor: %+v, want accepted and Overridden", a)
	}
	if a := ancestor(t, got["defaults"], "gw"); a.Enforced.Reason != v1alpha1.ReasonOverridden {
		t.Errorf("defaults ancestor: %+v, want Overridden", a)
	}
}

// TestConflictAndNotFound: the younger of two policies on one route is Conflicted and
// governs nothing; a missing route or rule is TargetNotFound; a regular expression Invalid.
func TestConflictAndNotFound(t *testing.T) {
	in := Inputs{Namespace: ns, Gateways: []gwapiv1.Gateway{gateway()}, HTTPRoutes: []gwapiv1.HTTPRoute{
		httpRoute("a", []string{"a.example.com"}, gwapiv1.HTTPRouteRule{}),
		httpRoute("re", nil, pathRule(gwapiv1.PathMatchRegularExpression, "/x.*", "")),
	}}
	rule := attached("rule", 1, "", "HTTPRoute", "a")
	missing := gwapiv1.SectionName("nope")
	rule.Spec.TargetRefs[0].SectionName = &missing
	got := Resolve(in, []v1alpha1.RateLimitPolicy{attached("young", 1, "", "HTTPRoute", "a"), attached("old", 5, "", "HTTPRoute", "a"),
		attached("ghost", 1, "", "HTTPRoute", "none"), attached("regex", 1, "", "HTTPRoute", "re"), rule})
	for name, reason := range map[string]string{"young": v1alpha1.ReasonConflicted, "ghost": v1alpha1.AncestorReasonTargetNotFound, "regex": v1alpha1.AncestorReasonInvalid, "rule": v1alpha1.AncestorReasonTargetNotFound} {
		r := got[name]
		if len(r.Matches) != 0 || len(r.Ancestors) != 1 || r.Ancestors[0].Accepted.OK || r.Ancestors[0].Accepted.Reason != reason {
			t.Errorf("%s: %+v, want nothing governed and Accepted=False %s", name, r, reason)
		}
	}
	if len(got["old"].Matches) != 1 {
		t.Errorf("old (the older) governs %+v", got["old"].Matches)
	}
}

// TestGRPCRouteAndListener: a GRPCRoute governs its services' and methods' paths; a Gateway
// policy on one listener governs only the routes attached to it (or to every listener).
func TestGRPCRouteAndListener(t *testing.T) {
	svc, method := "shop.v1.Cart", "Add"
	gr := gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cart"}}
	gr.Spec.Hostnames = []gwapiv1.Hostname{"grpc.example.com"}
	gr.Spec.ParentRefs = []gwapiv1.ParentReference{{Name: "gw", SectionName: ptrTo(gwapiv1.SectionName("l-grpc.example.com"))}}
	gr.Spec.Rules = []gwapiv1.GRPCRouteRule{{Matches: []gwapiv1.GRPCRouteMatch{
		{Method: &gwapiv1.GRPCMethodMatch{Service: &svc, Method: &method}}, {Method: &gwapiv1.GRPCMethodMatch{Service: &svc}}}}}
	in := Inputs{Namespace: ns, Gateways: []gwapiv1.Gateway{gateway("grpc.example.com", "web.example.com")},
		GRPCRoutes: []gwapiv1.GRPCRoute{gr},
		HTTPRoutes: []gwapiv1.HTTPRoute{httpRoute("web", []string{"web.example.com"}, gwapiv1.HTTPRouteRule{})}}
	web := attached("web-listener", 1, "", "Gateway", "gw")
	web.Spec.TargetRefs[0].SectionName = ptrTo(gwapiv1.SectionName("l-web.example.com"))
	got := Resolve(in, []v1alpha1.RateLimitPolicy{attached("cart", 2, "", "GRPCRoute", "cart"), web})
	want := []v1alpha1.HTTPMatch{{Hosts: []string{"grpc.example.com"}, PathPrefixes: []string{"/shop.v1.Cart/Add", "/shop.v1.Cart"}}}
	if !reflect.DeepEqual(got["cart"].Matches, want) {
		t.Errorf("cart matches %+v, want %+v", got["cart"].Matches, want)
	}
	if m := got["web-listener"].Matches; len(m) != 1 || m[0].Hosts[0] != "web.example.com" {
		t.Errorf("listener policy governs %+v, want only route web (the GRPCRoute is on the other listener)", m)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestParseImplementations: class names and controllerNames map to implementations, a class
// name first; a typo is refused with the item named.
func TestParseImplementations(t *testing.T) {
	m, err := ParseImplementations("special=Istio, " + DefaultImplementations)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Of("special", "gateway.envoyproxy.io/gatewayclass-controller"); got != Istio {
		t.Errorf("class name mapping: %q, want Istio", got)
	}
	if got := m.Of("eg", "gateway.envoyproxy.io/gatewayclass-controller"); got != EnvoyGateway {
		t.Errorf("controllerName mapping: %q, want EnvoyGateway", got)
	}
	if got := m.Of("other", "example.com/ctrl"); got != "" {
		t.Errorf("unmapped class: %q, want none", got)
	}
	for _, bad := range []string{"eg=Envoy", "=Istio", "eg"} {
		if _, err := ParseImplementations(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestUnserved: without Gateway API every target is not found, and the message says why.
func TestUnserved(t *testing.T) {
	got := Resolve(Inputs{Namespace: ns, Unserved: "no Gateway API"}, []v1alpha1.RateLimitPolicy{attached("p", 1, "", "HTTPRoute", "a")})
	a := got["p"].Ancestors
	if len(a) != 1 || a[0].Accepted.Reason != v1alpha1.AncestorReasonTargetNotFound || !strings.Contains(a[0].Accepted.Message, "no Gateway API") {
		t.Errorf("ancestors %+v, want TargetNotFound saying Gateway API is not served", a)
	}
}

// TestDefaultsKeepOtherRules: a policy on one named rule of a route takes that rule from
// the Gateway's defaults, which keep the route's other rules; overrides take them all.
func TestDefaultsKeepOtherRules(t *testing.T) {
	api, web := pathRule(gwapiv1.PathMatchPathPrefix, "/api", ""), pathRule(gwapiv1.PathMatchPathPrefix, "/web", "")
	api.Name = ptrTo(gwapiv1.SectionName("api"))
	in := Inputs{Namespace: ns, Gateways: []gwapiv1.Gateway{gateway()},
		HTTPRoutes: []gwapiv1.HTTPRoute{httpRoute("a", []string{"a.example.com"}, api, web)}}
	rulePolicy := attached("rule-api", 1, "", "HTTPRoute", "a")
	rulePolicy.Spec.TargetRefs[0].SectionName = ptrTo(gwapiv1.SectionName("api"))
	policies := []v1alpha1.RateLimitPolicy{attached("defaults", 2, "", "Gateway", "gw"), rulePolicy}
	got := Resolve(in, policies)
	if m := got["defaults"].Matches; len(m) != 1 || !reflect.DeepEqual(m[0].PathPrefixes, []string{"/web"}) {
		t.Errorf("defaults govern %+v, want only the /web rule", m)
	}
	if m := got["rule-api"].Matches; len(m) != 1 || !reflect.DeepEqual(m[0].PathPrefixes, []string{"/api"}) {
		t.Errorf("rule-api governs %+v, want the /api rule", m)
	}
	got = Resolve(in, append(policies, attached("overrides", 3, v1alpha1.PrecedenceOverrides, "Gateway", "gw")))
	if m := got["overrides"].Matches; len(m) != 2 || len(got["rule-api"].Matches) != 0 {
		t.Errorf("overrides govern %+v and rule-api %+v, want both rules to the overrides", m, got["rule-api"].Matches)
	}
}
