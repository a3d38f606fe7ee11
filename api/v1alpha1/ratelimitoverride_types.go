package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RateLimitOverrideSpec gives some callers of one policy another tier or limits of their
// own, without editing the policy: a platform or sales team may hold the right to edit
// overrides and not policies.
//
// +kubebuilder:validation:XValidation:rule="has(self.tier) != has(self.limits)",message="set exactly one of tier and limits"
type RateLimitOverrideSpec struct {
	// policyName names the RateLimitPolicy of this namespace whose callers are overridden.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PolicyName string `json:"policyName"`

	// callers are the identities the override applies to, as the policy's identity yields
	// them. Each is published only as a hash.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Callers []OverrideCaller `json:"callers"`

	// tier names a tier of the policy ("default" for spec.limits) whose limits the callers
	// get, whatever the tier conditions say. Set exactly one of tier and limits.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Tier string `json:"tier,omitempty"`

	// limits are the callers' own limits, as a tier's: a limit named as one of the policy's
	// shares its counter (and must have its period, or its calendar unit and time zone), so
	// raising a caller keeps what it has used. Set exactly one of tier and limits.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Limits []Limit `json:"limits,omitempty"`

	// expires is when the override stops applying, for example the end of a launch week;
	// the callers' tiers apply again from then on. Unset: it applies until deleted.
	// +optional
	Expires *metav1.Time `json:"expires,omitempty"`
}

// OverrideCaller is one caller of an override: its identity value, or the hash of its
// identity for an override kept in Git without the credential.
//
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.hash)",message="set exactly one of value and hash"
// +kubebuilder:validation:XValidation:rule="!has(self.hash) || !has(self.source)",message="source is for value only: a hash covers the identity as counted, source included"
type OverrideCaller struct {
	// value is the identity value the policy's identity yields for the caller, for example
	// its API key. The snapshot carries only its hash, but the override object holds it:
	// use hash to keep it out of Git.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`

	// source is the position in spec.identity.sources of the source that yields value, for
	// a policy with several sources. Defaults to 0, the first.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=7
	Source *int32 `json:"source,omitempty"`

	// hash is the identity as the metrics name it: the first 16 hex digits of the SHA-256
	// of the identity as counted (printf %s "$identity" | sha256sum | cut -c1-16; with
	// several sources the identity is "<position>=<value>").
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{16}$`
	Hash string `json:"hash,omitempty"`
}

// RateLimitOverrideStatus is the observed state of a RateLimitOverride.
type RateLimitOverrideStatus struct {
	// observedGeneration is the metadata.generation the controller last acted on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are the override's current state: Ready (True when it is published and
	// applies; False with reason PolicyNotFound, InvalidOverride or Expired).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RateLimitOverride gives callers of a RateLimitPolicy another tier or their own limits.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rlo,categories=ratelimit
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyName`
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=`.spec.tier`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expires`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RateLimitOverride struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is which callers get what.
	// +required
	Spec RateLimitOverrideSpec `json:"spec"`

	// status is the state observed by the controller.
	// +optional
	Status RateLimitOverrideStatus `json:"status,omitempty"`
}

// RateLimitOverrideList is a list of RateLimitOverride objects.
//
// +kubebuilder:object:root=true
type RateLimitOverrideList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the overrides.
	Items []RateLimitOverride `json:"items"`
}
