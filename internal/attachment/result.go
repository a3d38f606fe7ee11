package attachment

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// MaxAncestors is how many ancestors status.ancestors holds (the CRD's bound).
const MaxAncestors = 16

// Condition is one ancestor condition: True (OK) or False, with its reason and message.
type Condition struct {
	// OK is the condition's status.
	OK bool
	// Reason is the condition's reason.
	Reason string
	// Message says why, naming the objects involved.
	Message string
}

// Ancestor is a policy's state with respect to one ancestor: a Gateway its targets lead to,
// or the target itself when it cannot be resolved.
type Ancestor struct {
	// Ref names the ancestor as Gateway API's ParentReference.
	Ref gwapiv1.ParentReference
	// Accepted is the Gateway API Accepted condition.
	Accepted Condition
	// Enforced says whether the policy governs traffic through the ancestor.
	Enforced Condition
}

// Attached is a target a policy holds (accepted, not conflicted), with the Gateways its
// traffic passes through: what the data plane objects attach to.
type Attached struct {
	// Target is the policy's target reference.
	Target v1alpha1.TargetRef
	// Gateways are the Gateways the target is, or that the route attaches to.
	Gateways []types.NamespacedName
}

// Result is what one policy with targetRefs resolves to.
type Result struct {
	// Matches are the hostnames, path prefixes and methods the policy governs; none when it
	// governs nothing (no target found, conflicted or overridden everywhere).
	Matches []v1alpha1.HTTPMatch
	// Ancestors are the policy's state per ancestor, sorted, at most MaxAncestors.
	Ancestors []Ancestor
	// Attached are the targets the policy holds.
	Attached []Attached
}

// addMatches adds matches not already present.
func (r *Result) addMatches(ms []v1alpha1.HTTPMatch) {
	for _, m := range ms {
		k := matchKey(m)
		dup := false
		for _, have := range r.Matches {
			if matchKey(have) == k {
				dup = true
				break
			}
		}
		if !dup {
			r.Matches = append(r.Matches, m)
		}
	}
}

// addAncestor records a, merged with an entry for the same ancestor: a condition is True
// when it is True through any target, and the messages of equal outcomes are joined.
func (r *Result) addAncestor(a Ancestor) {
	for i := range r.Ancestors {
		if refKey(r.Ancestors[i].Ref) == refKey(a.Ref) {
			r.Ancestors[i].Accepted = mergeCondition(r.Ancestors[i].Accepted, a.Accepted)
			r.Ancestors[i].Enforced = mergeCondition(r.Ancestors[i].Enforced, a.Enforced)
			return
		}
	}
	r.Ancestors = append(r.Ancestors, a)
}

func mergeCondition(a, b Condition) Condition {
	switch {
	case a.OK != b.OK && b.OK:
		return b
	case a.OK != b.OK:
		return a
	case strings.Contains(a.Message, b.Message):
		return a
	default:
		a.Message += "; " + b.Message
		return a
	}
}

// finish sorts the ancestors and bounds them.
func (r *Result) finish() {
	sort.Slice(r.Ancestors, func(i, j int) bool { return refKey(r.Ancestors[i].Ref) < refKey(r.Ancestors[j].Ref) })
	if len(r.Ancestors) > MaxAncestors {
		r.Ancestors = r.Ancestors[:MaxAncestors]
	}
}

// refKey identifies a ParentReference.
func refKey(p gwapiv1.ParentReference) string {
	s := func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	}
	return strings.Join([]string{s((*string)(p.Group)), s((*string)(p.Kind)), s((*string)(p.Namespace)),
		string(p.Name), s((*string)(p.SectionName))}, "/")
}

// gatewayRef is the ParentReference of a Gateway.
func gatewayRef(key types.NamespacedName) gwapiv1.ParentReference {
	return objectRef(v1alpha1.KindGateway, key.Namespace, key.Name)
}

// objectRef is the ParentReference of a Gateway API object.
func objectRef(kind, ns, name string) gwapiv1.ParentReference {
	g, k, n := gwapiv1.Group(gwapiv1.GroupName), gwapiv1.Kind(kind), gwapiv1.Namespace(ns)
	return gwapiv1.ParentReference{Group: &g, Kind: &k, Namespace: &n, Name: gwapiv1.ObjectName(name)}
}
