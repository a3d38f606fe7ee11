package attachment

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// binding is one targetRef of one policy, resolved.
type binding struct {
	policy    string
	ref       v1alpha1.TargetRef
	overrides bool       // a Gateway target with precedence Overrides
	routes    []routeKey // the route targeted, or the routes a Gateway target governs
	accepted  Condition  // OK, or why not (Invalid, TargetNotFound, Conflicted)
}

func (b *binding) gateway() bool { return string(b.ref.Kind) == v1alpha1.KindGateway }

func (b *binding) section() string { return sectionName(b.ref.SectionName) }

// governors are the policies that claim one route, oldest first.
type governors struct {
	override *binding        // the oldest Gateway Overrides policy over the route
	defaults *binding        // the oldest Gateway Defaults policy over the route
	own      bool            // the route has a policy of its own
	ownRules map[string]bool // rules of the route with a policy of their own (sectionName)
}

// Resolve decides, for every policy of the namespace with targetRefs, what it governs and
// its status per ancestor. Policies are taken oldest first (creation time, then name): the
// older of two policies on one target (same kind, name, sectionName and, for Gateways,
// precedence) wins it and the younger is Conflicted there. Merging is per route and whole
// policy: a route is governed by the oldest Overrides policy of a Gateway it attaches to,
// else by its own policies, else by the oldest Defaults policy of such a Gateway; a route
// whose named rules have policies of their own leaves the Defaults policy its other rules.
func Resolve(in Inputs, policies []v1alpha1.RateLimitPolicy) map[string]*Result {
	ix := newIndex(in)
	bindings := ix.bind(ordered(policies))
	gov := map[routeKey]*governors{}
	for _, b := range bindings {
		if b.accepted.OK {
			claimRoutes(gov, b)
		}
	}
	out := map[string]*Result{}
	for _, p := range ordered(policies) {
		out[p.Name] = &Result{}
	}
	for _, b := range bindings {
		ix.contribute(out[b.policy], b, gov)
	}
	for _, r := range out {
		r.finish()
	}
	return out
}

// ordered are the policies with targetRefs that are not being deleted, oldest first.
func ordered(policies []v1alpha1.RateLimitPolicy) []*v1alpha1.RateLimitPolicy {
	var out []*v1alpha1.RateLimitPolicy
	for i := range policies {
		if len(policies[i].Spec.TargetRefs) > 0 && policies[i].DeletionTimestamp.IsZero() {
			out = append(out, &policies[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].CreationTimestamp, out[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// bind resolves every targetRef, in policy order, and marks conflicts.
func (ix *index) bind(policies []*v1alpha1.RateLimitPolicy) []*binding {
	claimed := map[string]string{} // target key -> policy holding it
	var out []*binding
	for _, p := range policies {
		for _, ref := range p.Spec.TargetRefs {
			b := &binding{policy: p.Name, ref: ref,
				overrides: string(ref.Kind) == v1alpha1.KindGateway && p.Spec.Precedence == v1alpha1.PrecedenceOverrides}
			key := fmt.Sprintf("%s/%s/%s/%t", ref.Kind, ref.Name, b.section(), b.overrides)
			switch holder, taken := claimed[key]; {
			case taken && holder == p.Name:
				continue // listed twice
			case taken:
				ix.locate(b)
				b.accepted = Condition{Reason: v1alpha1.ReasonConflicted, Message: fmt.Sprintf(
					"%s %s is already targeted by RateLimitPolicy %s, which is older (or, created at once, first by name)", ref.Kind, targetName(b), holder)}
			default:
				claimed[key] = p.Name
				b.accepted = ix.locate(b)
			}
			out = append(out, b)
		}
	}
	return out
}

func targetName(b *binding) string {
	if s := b.section(); s != "" {
		return string(b.ref.Name) + " (section " + s + ")"
	}
	return string(b.ref.Name)
}

// locate finds what b targets and sets b.routes; the condition says whether it was found.
func (ix *index) locate(b *binding) Condition {
	name, section := string(b.ref.Name), b.section()
	if ix.unserved != "" {
		return notFound(b, ix.unserved)
	}
	if b.gateway() {
		g := ix.gateways[types.NamespacedName{Namespace: ix.ns, Name: name}]
		if g == nil {
			return notFound(b, "")
		}
		if section != "" && !hasListener(g.Spec.Listeners, section) {
			return notFound(b, "it has no listener "+section)
		}
		for _, k := range ix.order {
			if ix.attaches(ix.routes[k], name, section) {
				b.routes = append(b.routes, k)
			}
		}
		return Condition{OK: true, Reason: v1alpha1.AncestorReasonAccepted, Message: "attached to Gateway " + targetName(b)}
	}
	k := routeKey{string(b.ref.Kind), name}
	r := ix.routes[k]
	if r == nil {
		return notFound(b, "")
	}
	b.routes = []routeKey{k}
	if section != "" && !hasRule(r.rules, section) {
		return notFound(b, "it has no rule named "+section)
	}
	if _, err := ix.matches(r, section); err != nil {
		return Condition{Reason: v1alpha1.AncestorReasonInvalid, Message: fmt.Sprintf("%s %s: %v", b.ref.Kind, name, err)}
	}
	return Condition{OK: true, Reason: v1alpha1.AncestorReasonAccepted, Message: fmt.Sprintf("attached to %s %s", b.ref.Kind, targetName(b))}
}

func notFound(b *binding, why string) Condition {
	msg := fmt.Sprintf("%s %s not found in the policy's namespace", b.ref.Kind, b.ref.Name)
	if why != "" {
		msg = fmt.Sprintf("%s %s: %s", b.ref.Kind, b.ref.Name, why)
	}
	return Condition{Reason: v1alpha1.AncestorReasonTargetNotFound, Message: msg}
}

// claimRoutes records b as a governor of its routes; bindings come oldest first.
func claimRoutes(gov map[routeKey]*governors, b *binding) {
	for _, k := range b.routes {
		g := gov[k]
		if g == nil {
			g = &governors{}
			gov[k] = g
		}
		switch {
		case !b.gateway() && b.section() != "":
			if g.ownRules == nil {
				g.ownRules = map[string]bool{}
			}
			g.ownRules[b.section()] = true
		case !b.gateway():
			g.own = true
		case b.overrides && g.override == nil:
			g.override = b
		case !b.overrides && g.defaults == nil:
			g.defaults = b
		}
	}
}
