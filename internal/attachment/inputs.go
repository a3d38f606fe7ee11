package attachment

import (
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Inputs are the Gateway API objects a namespace's policies may attach to, as read from the
// cluster.
type Inputs struct {
	// Namespace is the policies' namespace; routes and target Gateways must be in it.
	Namespace string
	// Gateways are the namespace's Gateways and the Gateways of other namespaces that its
	// routes name as parents (for their listeners' hostnames).
	Gateways []gwapiv1.Gateway
	// HTTPRoutes are the namespace's HTTPRoutes.
	HTTPRoutes []gwapiv1.HTTPRoute
	// GRPCRoutes are the namespace's GRPCRoutes.
	GRPCRoutes []gwapiv1.GRPCRoute
	// Unserved, when set, says why there are no objects at all (Gateway API is not served):
	// every target is not found, and its message says this.
	Unserved string
}

// route is an HTTPRoute or GRPCRoute reduced to what attachment needs.
type route struct {
	kind      string
	name      string
	hostnames []string
	parents   []gwapiv1.ParentReference
	rules     []rule
}

// index finds the inputs by name.
type index struct {
	ns       string
	unserved string
	gateways map[types.NamespacedName]*gwapiv1.Gateway
	routes   map[routeKey]*route
	order    []routeKey // routes in a stable order
}

// routeKey names a route of the namespace.
type routeKey struct{ kind, name string }

func newIndex(in Inputs) *index {
	ix := &index{ns: in.Namespace, unserved: in.Unserved, gateways: map[types.NamespacedName]*gwapiv1.Gateway{}, routes: map[routeKey]*route{}}
	for i := range in.Gateways {
		g := &in.Gateways[i]
		ix.gateways[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}] = g
	}
	for _, r := range in.HTTPRoutes {
		ix.add(&route{kind: v1alpha1.KindHTTPRoute, name: r.Name, hostnames: hostnames(r.Spec.Hostnames),
			parents: r.Spec.ParentRefs, rules: httpRules(r.Spec.Rules)})
	}
	for _, r := range in.GRPCRoutes {
		ix.add(&route{kind: v1alpha1.KindGRPCRoute, name: r.Name, hostnames: hostnames(r.Spec.Hostnames),
			parents: r.Spec.ParentRefs, rules: grpcRules(r.Spec.Rules)})
	}
	return ix
}

func (ix *index) add(r *route) {
	k := routeKey{r.kind, r.name}
	ix.routes[k] = r
	ix.order = append(ix.order, k)
}

func hostnames(in []gwapiv1.Hostname) []string {
	out := make([]string, len(in))
	for i, h := range in {
		out[i] = string(h)
	}
	return out
}

// parentGateway is the Gateway a parent reference names, ok false when it names another kind.
func (ix *index) parentGateway(p gwapiv1.ParentReference) (types.NamespacedName, bool) {
	if p.Group != nil && *p.Group != gwapiv1.GroupName || p.Kind != nil && *p.Kind != v1alpha1.KindGateway {
		return types.NamespacedName{}, false
	}
	ns := ix.ns
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(p.Name)}, true
}

// hosts are the hostnames a route governs: its own, else those of the listeners it attaches
// to; nil (every host) when a listener has none or a parent Gateway cannot be read.
func (ix *index) hosts(r *route) []string {
	if len(r.hostnames) > 0 {
		return r.hostnames
	}
	var out []string
	for _, p := range r.parents {
		key, ok := ix.parentGateway(p)
		g := ix.gateways[key]
		if !ok || g == nil {
			return nil
		}
		for _, l := range g.Spec.Listeners {
			if p.SectionName != nil && *p.SectionName != l.Name {
				continue
			}
			if l.Hostname == nil {
				return nil
			}
			out = append(out, string(*l.Hostname))
		}
	}
	return out
}

// matches are the route's match entries, with hosts, for every rule or the rule named
// section; err when a rule cannot be expressed.
func (ix *index) matches(r *route, section string) ([]v1alpha1.HTTPMatch, error) {
	return ix.rulesMatching(r, func(ru rule) bool { return section == "" || ru.name == section })
}

// matchesExcept are the route's match entries, with hosts, but the named rules'.
func (ix *index) matchesExcept(r *route, skip map[string]bool) ([]v1alpha1.HTTPMatch, error) {
	return ix.rulesMatching(r, func(ru rule) bool { return ru.name == "" || !skip[ru.name] })
}

func (ix *index) rulesMatching(r *route, keep func(rule) bool) ([]v1alpha1.HTTPMatch, error) {
	hosts := ix.hosts(r)
	var out []v1alpha1.HTTPMatch
	for _, ru := range r.rules {
		if !keep(ru) {
			continue
		}
		if ru.err != nil {
			return nil, ru.err
		}
		out = append(out, withHosts(ru.matches, hosts)...)
	}
	return out, nil
}

// attaches reports whether route r attaches to the namespace's Gateway gw, to its listener
// when listener is set (a parent reference without sectionName attaches to every listener).
func (ix *index) attaches(r *route, gw, listener string) bool {
	for _, p := range r.parents {
		key, ok := ix.parentGateway(p)
		if ok && key.Namespace == ix.ns && key.Name == gw &&
			(listener == "" || p.SectionName == nil || string(*p.SectionName) == listener) {
			return true
		}
	}
	return false
}

// typesName is a namespaced name.
type typesName = types.NamespacedName
