package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KeyLayout is the Redis keys a policy's script touches. Every template must begin with the
// hash tag's brace, the installation's key prefix (the manager's --key-prefix, "rl:" by
// default) and "${namespace}/", for example "{rl:${namespace}/${policy}:${identity}}:${limit}":
// so a policy can only ever name keys of its own namespace. Templates may use ${namespace},
// ${policy}, ${identity} (the encoded caller identity), ${limit} (the limit name) and, in the
// idempotency template, ${requestId}; ${slot} is still accepted and expands empty (it named
// SlidingWindow's two window keys, which are now one). Every
// key of one policy must share one non-empty hash tag (the text between the first "{" and
// the next "}") so Redis Cluster keeps them on one slot.
//
// +kubebuilder:validation:XValidation:rule="!has(self.ttl) || duration(self.ttl) >= duration('1ms')",message="ttl must be at least 1ms: keys without a TTL never expire",fieldPath=".ttl"
type KeyLayout struct {
	// state is the template of the keys holding the counters, one per limit. Defaults to
	// "{rl:${namespace}/${policy}:${identity}}:${limit}".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	State string `json:"state,omitempty"`

	// idempotency is the template of the request-id keys, used when idempotency is set.
	// Defaults to the state key's hash tag followed by ":idem:${requestId}".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Idempotency string `json:"idempotency,omitempty"`

	// ttl is how long an idle identity's keys live after their last write. It must cover the
	// algorithm's horizon; when omitted it defaults to that horizon.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	TTL *metav1.Duration `json:"ttl,omitempty"`
}
