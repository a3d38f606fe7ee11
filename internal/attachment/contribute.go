package attachment

import (
	"fmt"
	"slices"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// contribute adds what binding b governs, its ancestors and its data plane target to res.
func (ix *index) contribute(res *Result, b *binding, gov map[routeKey]*governors) {
	if !b.accepted.OK {
		notAccepted := Condition{Reason: v1alpha1.AncestorReasonNotAccepted, Message: b.accepted.Message}
		for _, ref := range ix.ancestors(b) {
			res.addAncestor(Ancestor{Ref: ref, Accepted: b.accepted, Enforced: notAccepted})
		}
		return
	}
	var enforced Condition
	if b.gateway() {
		enforced = ix.contributeGateway(res, b, gov)
	} else {
		enforced = ix.contributeRoute(res, b, gov[b.routes[0]])
	}
	for _, ref := range ix.ancestors(b) {
		res.addAncestor(Ancestor{Ref: ref, Accepted: b.accepted, Enforced: enforced})
	}
	res.Attached = append(res.Attached, Attached{Target: b.ref, Gateways: ix.gatewaysOf(b)})
}

// contributeRoute is a route policy: its route's matches unless a Gateway overrides it.
func (ix *index) contributeRoute(res *Result, b *binding, g *governors) Condition {
	r := ix.routes[b.routes[0]]
	if o := g.override; o != nil {
		return Condition{Reason: v1alpha1.ReasonOverridden, Message: fmt.Sprintf(
			"%s %s is governed by RateLimitPolicy %s, which overrides route policies on Gateway %s", r.kind, r.name, o.policy, o.ref.Name)}
	}
	ms, _ := ix.matches(r, b.section()) // locate checked the error
	res.addMatches(ms)
	return Condition{OK: true, Reason: v1alpha1.AncestorReasonEnforced, Message: fmt.Sprintf(
		"governs %s %s: %s", r.kind, targetName(b), describe(ms))}
}

// contributeGateway is a Gateway policy: the routes it governs, each unless a route policy
// (for defaults) or an older overrides policy takes it.
func (ix *index) contributeGateway(res *Result, b *binding, gov map[routeKey]*governors) Condition {
	var took, yielded []string
	for _, k := range b.routes {
		name := k.kind + " " + k.name
		if by := yieldsTo(b, gov[k]); by != "" {
			yielded = append(yielded, name+" to "+by)
			continue
		}
		skip := gov[k].ownRules
		if b.overrides {
			skip = nil // overrides take the rules with policies of their own too
		}
		ms, err := ix.matchesExcept(ix.routes[k], skip)
		switch {
		case err != nil:
			yielded = append(yielded, fmt.Sprintf("%s, which cannot be governed (%v)", name, err))
		case len(ms) == 0:
			yielded = append(yielded, name+" to its rules' own policies")
		default:
			res.addMatches(ms)
			took = append(took, name)
		}
	}
	switch {
	case len(took) > 0:
		msg := "governs " + strings.Join(took, ", ")
		if len(yielded) > 0 {
			msg += "; yields " + strings.Join(yielded, ", ")
		}
		return Condition{OK: true, Reason: v1alpha1.AncestorReasonEnforced, Message: msg}
	case len(yielded) > 0:
		return Condition{Reason: v1alpha1.ReasonOverridden, Message: "yields every route: " + strings.Join(yielded, ", ")}
	default:
		return Condition{Reason: v1alpha1.AncestorReasonNoRoutes, Message: fmt.Sprintf(
			"no HTTPRoute or GRPCRoute of namespace %s attaches to Gateway %s yet", ix.ns, targetName(b))}
	}
}

// yieldsTo names the policy that governs the route instead of Gateway policy b, "" if none.
func yieldsTo(b *binding, g *governors) string {
	switch {
	case g.override != nil && g.override != b:
		return "RateLimitPolicy " + g.override.policy + " (Overrides)"
	case b.overrides:
		return ""
	case g.override != nil:
		return "RateLimitPolicy " + g.override.policy + " (Overrides)"
	case g.own:
		return "its own policy"
	case g.defaults != b:
		return "RateLimitPolicy " + g.defaults.policy + " (older Defaults)"
	}
	return ""
}

// ancestors are the ancestors b reports on: the Gateway it targets, the Gateways its route
// attaches to, or, when there are none (not found, no parent Gateway), the target itself.
func (ix *index) ancestors(b *binding) []gwapiv1.ParentReference {
	var out []gwapiv1.ParentReference
	for _, g := range ix.gatewaysOf(b) {
		out = append(out, gatewayRef(g))
	}
	if len(out) == 0 {
		ref := objectRef(string(b.ref.Kind), ix.ns, string(b.ref.Name))
		ref.SectionName = b.ref.SectionName
		out = append(out, ref)
	}
	return out
}

// gatewaysOf are the Gateways of b's traffic: the Gateway targeted, or the route's parent
// Gateways, in any namespace.
func (ix *index) gatewaysOf(b *binding) []typesName {
	if b.gateway() {
		if _, ok := ix.gateways[typesName{Namespace: ix.ns, Name: string(b.ref.Name)}]; ok {
			return []typesName{{Namespace: ix.ns, Name: string(b.ref.Name)}}
		}
		return nil
	}
	r := ix.routes[routeKey{string(b.ref.Kind), string(b.ref.Name)}]
	if r == nil {
		return nil
	}
	var out []typesName
	for _, p := range r.parents {
		if key, ok := ix.parentGateway(p); ok && !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// describe is a short account of matches for a message.
func describe(ms []v1alpha1.HTTPMatch) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		hosts := "any host"
		if len(m.Hosts) > 0 {
			hosts = strings.Join(m.Hosts, ",")
		}
		s := hosts + " " + strings.Join(m.PathPrefixes, ",")
		if len(m.Methods) > 0 {
			s += fmt.Sprint(" ", m.Methods)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func hasListener(ls []gwapiv1.Listener, name string) bool {
	return slices.ContainsFunc(ls, func(l gwapiv1.Listener) bool { return string(l.Name) == name })
}

func hasRule(rs []rule, name string) bool {
	return slices.ContainsFunc(rs, func(r rule) bool { return r.name == name })
}
