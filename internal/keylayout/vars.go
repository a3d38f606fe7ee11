package keylayout

import (
	"slices"
	"strings"
)

// Variable names usable in templates as ${name}.
const (
	// VarNamespace is the Kubernetes namespace of the rate-limit policy.
	VarNamespace = "namespace"
	// VarPolicy is the name of the rate-limit policy.
	VarPolicy = "policy"
	// VarIdentity is the client identity being limited; untrusted input.
	VarIdentity = "identity"
	// VarLimit is the name of one limit within the policy.
	VarLimit = "limit"
	// VarSlot once named SlidingWindow's two window keys; both windows now live in one key,
	// and the variable is accepted for old templates and expands empty.
	VarSlot = "slot"
	// VarRequestID is the request ID of idempotency keys only; untrusted input.
	VarRequestID = "requestId"
)

// Values are the variable values for one expansion. Identity and RequestID are untrusted.
type Values struct {
	Namespace, Policy, Identity, Limit, Slot, RequestID string
}

// varID identifies a template variable; it indexes varNames.
type varID uint8

const (
	idNamespace varID = iota
	idPolicy
	idIdentity
	idLimit
	idSlot
	idRequestID
	numVars
)

// varNames maps varID to the variable's name.
var varNames = [numVars]string{VarNamespace, VarPolicy, VarIdentity, VarLimit, VarSlot, VarRequestID}

// lookupVar returns the varID of the variable called name.
func lookupVar(name string) (varID, bool) {
	for id, n := range varNames {
		if n == name {
			return varID(id), true
		}
	}
	return 0, false
}

// value returns the value of variable id in v; a nil v has only empty values.
func (v *Values) value(id varID) string {
	if v == nil {
		return ""
	}
	switch id {
	case idNamespace:
		return v.Namespace
	case idPolicy:
		return v.Policy
	case idIdentity:
		return v.Identity
	case idLimit:
		return v.Limit
	case idSlot:
		return v.Slot
	default:
		return v.RequestID
	}
}

// varSet is a set of variables, one bit per varID.
type varSet uint8

// allVars is the set of every known variable.
const allVars varSet = 1<<numVars - 1

// has reports whether id is in the set.
func (s varSet) has(id varID) bool { return s&(1<<id) != 0 }

// names returns the names of the set's variables, sorted.
func (s varSet) names() []string {
	var names []string
	for id := range numVars {
		if s.has(id) {
			names = append(names, varNames[id])
		}
	}
	slices.Sort(names)
	return names
}

// String lists the set's variable names, sorted and comma-separated.
func (s varSet) String() string { return strings.Join(s.names(), ", ") }
