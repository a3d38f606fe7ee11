// Package scheme builds the runtime.Scheme every binary and test of the operator uses, and
// tells whether the API server serves a kind (Served).
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// New returns a scheme with the built-in Kubernetes types, the policy.ratelimit.dev API and
// Gateway API v1 (the objects policies attach to).
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(policyv1alpha1.AddToScheme(s))
	utilruntime.Must(gwapiv1.Install(s))
	return s
}
