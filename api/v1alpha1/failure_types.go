package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FailureMode is what the limiter answers while Redis cannot be reached.
// +kubebuilder:validation:Enum=FailOpen;FailClosed;LocalCap
type FailureMode string

const (
	// FailureModeFailOpen admits every request while Redis is away. The default: an outage of the limiter
	// does not become an outage of the service.
	FailureModeFailOpen FailureMode = "FailOpen"
	// FailureModeFailClosed denies every request while Redis is away; for login and payment paths.
	FailureModeFailClosed FailureMode = "FailClosed"
	// FailureModeLocalCap admits up to localCap per identity within each sidecar while Redis is away.
	FailureModeLocalCap FailureMode = "LocalCap"
)

// LocalCap is the in-process fallback limit of each sidecar while Redis is away. With N
// sidecars a caller may get up to N times requests per period in total.
//
// +kubebuilder:validation:XValidation:rule="duration(self.period) >= duration('1ms')",message="period must be at least 1ms",fieldPath=".period"
type LocalCap struct {
	// requests is how many requests per period one sidecar admits per identity.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	Requests int64 `json:"requests"`

	// period is the window of the local cap, for example "1s".
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	Period metav1.Duration `json:"period"`

	// maxIdentities bounds the identities each sidecar tracks locally; beyond it the least
	// recently seen are forgotten, so memory stays bounded.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxIdentities int32 `json:"maxIdentities,omitempty"`
}

// Idempotency makes retried requests safe: the first decision for a request id is stored in
// Redis next to the counters, bound to the request it was made for, and a retry of that
// request with the same id gets that decision again without debiting, up to maxReplays times.
//
// +kubebuilder:validation:XValidation:rule="duration(self.ttl) >= duration('1s') && duration(self.ttl) <= duration('24h')",message="ttl must be between 1s and 24h",fieldPath=".ttl"
type Idempotency struct {
	// header is the HTTP header carrying the request id.
	// +optional
	// +kubebuilder:default=Idempotency-Key
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Header string `json:"header,omitempty"`

	// descriptorKey is the Envoy descriptor entry carrying the request id.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	DescriptorKey string `json:"descriptorKey,omitempty"`

	// maxReplays is how many times one request id may get its first decision back within
	// ttl. A replay must be the same request as the first: same identity and cost and, on
	// HTTP, the same method, host, path and query (on Envoy RLS the same domain and
	// descriptor entries; on the check API the same stated fingerprint). Another request
	// under a seen id, or a replay beyond maxReplays, is checked and debited as a new
	// request. The upstream still receives every replay and must itself answer a duplicate
	// without doing its work twice.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplays int32 `json:"maxReplays,omitempty"`

	// ttl is how long a request id is remembered, for example "10m".
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	TTL metav1.Duration `json:"ttl"`
}
