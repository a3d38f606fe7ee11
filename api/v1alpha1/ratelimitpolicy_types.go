package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RateLimitPolicySpec is the desired behaviour of a rate limit: which requests it governs,
// who the caller is, how requests are counted, and what happens when Redis is away.
//
// +kubebuilder:validation:XValidation:rule="self.algorithm in ['TokenBucket', 'GCRA'] || self.limits.all(l, !has(l.burst))",message="burst is only allowed when algorithm is TokenBucket or GCRA",fieldPath=".limits"
// +kubebuilder:validation:XValidation:rule="self.algorithm in ['TokenBucket', 'GCRA'] || !has(self.tiers) || self.tiers.all(t, t.limits.all(l, !has(l.burst)))",message="burst is only allowed when algorithm is TokenBucket or GCRA",fieldPath=".tiers"
// +kubebuilder:validation:XValidation:rule="self.failureMode == 'LocalCap' ? has(self.localCap) : !has(self.localCap)",message="localCap must be set when failureMode is LocalCap, and only then",fieldPath=".localCap"
// +kubebuilder:validation:XValidation:rule="!has(self.identity.sources) || !self.identity.sources.exists(s, s.type == 'Descriptor') || (has(self.match) && has(self.match.envoy))",message="identity source type Descriptor needs match.envoy: descriptors only exist on the Envoy front",fieldPath=".identity.sources"
// +kubebuilder:validation:XValidation:rule="!has(self.identity.parts) || !self.identity.parts.exists(p, p.sources.exists(s, s.type == 'Descriptor')) || (has(self.match) && has(self.match.envoy))",message="identity source type Descriptor needs match.envoy: descriptors only exist on the Envoy front",fieldPath=".identity.parts"
// +kubebuilder:validation:XValidation:rule="(has(self.match) && has(self.match.http)) || has(self.targetRefs) || ((!has(self.identity.sources) || !self.identity.sources.exists(s, s.type in ['Method', 'PathPrefix'])) && (!has(self.identity.parts) || !self.identity.parts.exists(p, p.sources.exists(s, s.type in ['Method', 'PathPrefix']))))",message="identity source types Method and PathPrefix need match.http or targetRefs: they read the HTTP request, which the Envoy RLS front never sees",fieldPath=".identity"
// +kubebuilder:validation:XValidation:rule="!has(self.idempotency) || !has(self.idempotency.descriptorKey) || (has(self.match) && has(self.match.envoy))",message="idempotency.descriptorKey needs match.envoy",fieldPath=".idempotency.descriptorKey"
// +kubebuilder:validation:XValidation:rule="has(self.match) != has(self.targetRefs)",message="set exactly one of match and targetRefs: a policy attached to Gateway API objects takes the hosts, paths and methods it governs from them"
// +kubebuilder:validation:XValidation:rule="!has(self.precedence) || (has(self.targetRefs) && self.targetRefs.all(t, t.kind == 'Gateway'))",message="precedence is only for policies whose targetRefs are all Gateways",fieldPath=".precedence"
type RateLimitPolicySpec struct {
	// match selects the requests this policy governs: HTTP hosts, path prefixes and methods
	// for the HTTP and reverse-proxy fronts, and an Envoy rate limit domain with descriptor
	// entries for the Envoy RLS front. Required unless targetRefs is set, forbidden with it.
	// +optional
	Match Match `json:"match,omitzero"`

	// targetRefs attach the policy to Gateway API objects of its namespace (GEP-713): it
	// governs the hostnames, paths and methods of the targeted routes, or of every route of
	// a targeted Gateway, following them as they change. Forbidden with match.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	TargetRefs []TargetRef `json:"targetRefs,omitempty"`

	// precedence is how a policy whose targetRefs are Gateways combines with the policies of
	// the Gateways' routes, per route and as a whole: Defaults (the default) applies to
	// routes without a policy of their own, Overrides replaces the routes' own policies.
	// +optional
	Precedence Precedence `json:"precedence,omitempty"`

	// identity says who the caller is: an ordered list of sources, the first one present
	// wins, or parts whose combination is the identity. Each distinct identity gets its own
	// counters.
	// +required
	Identity Identity `json:"identity"`

	// algorithm is the counting algorithm run atomically inside Redis.
	// +required
	Algorithm Algorithm `json:"algorithm"`

	// limits are the limits every matched request is checked against, for example 10 per
	// second and 1000 per hour. All limits are checked and debited in one atomic script call,
	// all-or-nothing: a request denied by one limit debits none of them. Names are unique.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Limits []Limit `json:"limits"`

	// tiers are named plans with their own limits, each chosen per request by a CEL
	// condition; the first tier whose condition holds applies, spec.limits (the tier named
	// default) when none does. A caller moved from one tier to another keeps what it has
	// used of every limit the two tiers share by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Tiers []Tier `json:"tiers,omitempty"`

	// cost is the weight a request debits from every limit. Defaults to 1 per request.
	// +optional
	Cost *Cost `json:"cost,omitempty"`

	// keyLayout is the Redis key templates the script touches and their time to live. When
	// omitted, the admission webhook fills in a layout that keeps every key of one identity
	// under one hash tag, and a TTL that covers the algorithm's horizon.
	// +optional
	KeyLayout *KeyLayout `json:"keyLayout,omitempty"`

	// failureMode is what the limiter answers while Redis cannot be reached: FailOpen admits,
	// FailClosed denies, LocalCap admits up to localCap per identity within each sidecar.
	// +optional
	// +kubebuilder:default=FailOpen
	FailureMode FailureMode `json:"failureMode,omitempty"`

	// localCap is the in-process limit each sidecar applies per identity while Redis is away.
	// Required when failureMode is LocalCap, forbidden otherwise.
	// +optional
	LocalCap *LocalCap `json:"localCap,omitempty"`

	// idempotency makes retries safe: a request carrying an id already seen within the TTL
	// gets the first decision again and debits nothing.
	// +optional
	Idempotency *Idempotency `json:"idempotency,omitempty"`

	// shadow evaluates and reports every decision (metrics, headers, logs) but always admits.
	// Use it to observe a new policy before enforcing it.
	// +optional
	Shadow bool `json:"shadow,omitempty"`

	// hotKeys tunes how sidecars treat identities hot enough to load one Redis node.
	// +optional
	HotKeys *HotKeys `json:"hotKeys,omitempty"`

	// concurrency also limits the requests of one identity in flight at once, checked with
	// the limits in one atomic call. Not with idempotency, hotKeys leases or shards.
	// +optional
	Concurrency *Concurrency `json:"concurrency,omitempty"`
}

// RateLimitPolicyStatus is the observed state of a RateLimitPolicy, written by the controller.
type RateLimitPolicyStatus struct {
	// observedGeneration is the metadata.generation the controller last acted on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are the policy's current state: Ready, Published, ScriptsLoaded,
	// CountersProtected and, while the policy cannot be published without a change,
	// Stalled; each with the generation it was computed for.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// scripts are the Lua scripts this policy runs, by name, with the SHA1 digests preloaded
	// into Redis.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Scripts []ScriptStatus `json:"scripts,omitempty"`

	// snapshot is the sidecar snapshot that carries this policy.
	// +optional
	Snapshot *SnapshotReference `json:"snapshot,omitempty"`

	// ancestors is the policy's state with respect to each Gateway its targetRefs lead to
	// (or each target that could not be resolved), as Gateway API tools read it: Accepted
	// and Enforced conditions per ancestor. Empty for a policy without targetRefs.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Ancestors []gwapiv1.PolicyAncestorStatus `json:"ancestors,omitempty"`
}

// RateLimitPolicy limits how often callers may make the requests it matches. It is enforced
// by the ratelimit sidecar, atomically in Redis, across every replica of a service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rlp,categories=ratelimit
// +kubebuilder:metadata:labels="gateway.networking.k8s.io/policy=inherited"
// +kubebuilder:printcolumn:name="Algorithm",type=string,JSONPath=`.spec.algorithm`
// +kubebuilder:printcolumn:name="Requests",type=integer,JSONPath=`.spec.limits[0].requests`,description="Requests allowed by the first limit"
// +kubebuilder:printcolumn:name="Per",type=string,JSONPath=`.spec.limits[0].period`,description="Period of the first limit"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RateLimitPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired rate limit.
	// +required
	Spec RateLimitPolicySpec `json:"spec"`

	// status is the state observed by the controller. It defaults to observedGeneration 0,
	// so that a policy the controller has not acted on yet reads as in progress to kstatus
	// (Flux, kpt, cli-utils), not as current: kstatus cannot tell a missing status from one
	// that has nothing to report.
	// +optional
	// +kubebuilder:default={observedGeneration: 0}
	Status RateLimitPolicyStatus `json:"status,omitempty"`
}

// RateLimitPolicyList is a list of RateLimitPolicy objects.
//
// +kubebuilder:object:root=true
type RateLimitPolicyList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the policies.
	Items []RateLimitPolicy `json:"items"`
}
