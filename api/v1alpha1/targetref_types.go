package v1alpha1

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Gateway API kinds a policy may target.
const (
	// KindGateway is the Gateway API Gateway kind.
	KindGateway = "Gateway"
	// KindHTTPRoute is the Gateway API HTTPRoute kind.
	KindHTTPRoute = "HTTPRoute"
	// KindGRPCRoute is the Gateway API GRPCRoute kind.
	KindGRPCRoute = "GRPCRoute"
)

// TargetRef names a Gateway API object in the policy's own namespace that the policy attaches
// to (GEP-713 policy attachment). It has no namespace field: a policy can only attach to
// objects of its own namespace.
type TargetRef struct {
	// group is the target's API group; only gateway.networking.k8s.io.
	// +required
	// +kubebuilder:validation:Enum=gateway.networking.k8s.io
	Group gwapiv1.Group `json:"group"`

	// kind is the target's kind: Gateway (every route attached to it, see precedence),
	// HTTPRoute or GRPCRoute (that route's hostnames, paths and methods).
	// +required
	// +kubebuilder:validation:Enum=Gateway;HTTPRoute;GRPCRoute
	Kind gwapiv1.Kind `json:"kind"`

	// name is the target's name, in the policy's namespace.
	// +required
	Name gwapiv1.ObjectName `json:"name"`

	// sectionName narrows the target to one section of it: a listener of a Gateway, or a
	// named rule of an HTTPRoute or GRPCRoute. Omitted targets the whole object.
	// +optional
	SectionName *gwapiv1.SectionName `json:"sectionName,omitempty"`
}

// Precedence says how a policy attached to a Gateway combines with policies attached to the
// Gateway's routes.
// +kubebuilder:validation:Enum=Defaults;Overrides
type Precedence string

const (
	// PrecedenceDefaults applies the policy to the Gateway's routes that have no policy of
	// their own; a route policy replaces it on its route.
	PrecedenceDefaults Precedence = "Defaults"
	// PrecedenceOverrides applies the policy to every route of the Gateway, replacing the
	// routes' own policies there.
	PrecedenceOverrides Precedence = "Overrides"
)
