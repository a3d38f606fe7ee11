package v1alpha1

// Tier is a named plan of a policy: its own limits, for the requests its condition selects.
// Tiers share the policy's algorithm, identity and key layout, and a limit of a tier with
// the same name as a limit of spec.limits (or of another tier) counts in the same Redis
// state, so moving a caller from one tier to another keeps what it has used.
//
// +kubebuilder:validation:XValidation:rule="self.name != 'default'",message="the name default is the tier of spec.limits; name this tier otherwise",fieldPath=".name"
type Tier struct {
	// name identifies the tier in replies, headers, metrics and the check API, for example
	// "pro". Unique within the policy; "default" names spec.limits.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// when is a CEL expression over the request that selects this tier when it is true, for
	// example `headers["x-plan"] == "pro"` or `has(claims.plan) && claims.plan == "pro"`.
	// Tiers are tried in order; the first whose condition is true applies, and spec.limits
	// applies when none is. The expression sees method, host and path (strings), headers
	// (lower-case names), claims (the payload of the bearer token in the Authorization
	// header, verified by the gateway in front) and descriptors (the Envoy descriptor's
	// entries). It must be a bool and is refused at admission when its estimated cost is too
	// high. An expression that fails on a request (an absent header or claim) does not select
	// its tier.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	When string `json:"when"`

	// limits are the tier's limits, in place of spec.limits for the requests it selects.
	// A limit named as one of spec.limits or of another tier shares its counters and must
	// have the same period (or the same calendar unit and time zone).
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Limits []Limit `json:"limits"`
}
