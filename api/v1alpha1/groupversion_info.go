// Package v1alpha1 contains the v1alpha1 API of the policy.ratelimit.dev group: the
// RateLimitPolicy and RateLimitOverride custom resources, and the cluster-scoped RedisBackend.
// +kubebuilder:object:generate=true
// +groupName=policy.ratelimit.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "policy.ratelimit.dev", Version: "v1alpha1"}

	// SchemeBuilder is used to add Go types to the GroupVersionKind scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the group's kinds with s.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &RateLimitPolicy{}, &RateLimitPolicyList{}, &RateLimitOverride{}, &RateLimitOverrideList{},
		&RedisBackend{}, &RedisBackendList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
