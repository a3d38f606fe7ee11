package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Concurrency limits the requests of one identity in flight at once, across every sidecar:
// each request the policy admits holds a slot in Redis from its admission until it ends
// (the reverse proxy: its response ends; the check API: its release call), or until its
// slot expires. A request its rate limits deny takes no slot, and a request refused a slot
// is debited nothing.
//
// +kubebuilder:validation:XValidation:rule="!has(self.slotTTL) || (duration(self.slotTTL) >= duration('1s') && duration(self.slotTTL) <= duration('24h'))",message="slotTTL must be between 1s and 24h",fieldPath=".slotTTL"
type Concurrency struct {
	// max is the most requests of one identity in flight at once.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Max int64 `json:"max"`

	// slotTTL is how long a request keeps its slot when its end is never reported (its
	// sidecar crashed, or a front that never sees the response admitted it): the slot
	// comes back by itself then. Make it longer than the longest request the policy
	// admits: a slot that expires while its request still runs lets one more in. Defaults
	// to 5m.
	// +optional
	// +kubebuilder:default="5m"
	SlotTTL *metav1.Duration `json:"slotTTL,omitempty"`
}
