// Package v1alpha1 holds the admission webhooks of RateLimitPolicy: defaulting (a safe key
// layout and TTL) and validation (Cluster-slot safety, TTL horizon, templates), both thin
// wrappers over internal/policy, which the controller calls too.
package v1alpha1

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// SetupRateLimitPolicyWebhookWithManager registers the defaulting and validating webhooks.
func SetupRateLimitPolicyWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &policyv1alpha1.RateLimitPolicy{}). //nolint:wrapcheck // setup error is reported as is.
											WithDefaulter(&Defaulter{}).
											WithValidator(&Validator{}).
											Complete()
}

// +kubebuilder:webhook:path=/mutate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy,mutating=true,failurePolicy=fail,sideEffects=None,groups=policy.ratelimit.dev,resources=ratelimitpolicies,verbs=create;update,versions=v1alpha1,name=mratelimitpolicy-v1alpha1.ratelimit.dev,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent

// Defaulter fills in a safe key layout and a TTL covering the algorithm's horizon.
type Defaulter struct{}

var _ admission.Defaulter[*policyv1alpha1.RateLimitPolicy] = &Defaulter{}

// Default implements admission.Defaulter.
func (d *Defaulter) Default(ctx context.Context, p *policyv1alpha1.RateLimitPolicy) error {
	policy.Default(p)
	logf.FromContext(ctx).V(1).Info("defaulted policy", "policy", p.Namespace+"/"+p.Name,
		"stateKey", p.Spec.KeyLayout.State, "ttl", p.Spec.KeyLayout.TTL)
	return nil
}

// +kubebuilder:webhook:path=/validate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=policy.ratelimit.dev,resources=ratelimitpolicies,verbs=create;update,versions=v1alpha1,name=vratelimitpolicy-v1alpha1.ratelimit.dev,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent

// Validator refuses policies whose keys would cross Cluster slots, lack or undercut a TTL, or
// that the limiter's scripts cannot run, and warns about hot slots, FailOpen on sensitive
// paths and changes that orphan live counters.
type Validator struct{}

var _ admission.Validator[*policyv1alpha1.RateLimitPolicy] = &Validator{}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(_ context.Context, p *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	return validate(nil, p)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(_ context.Context, old, p *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	return validate(old, p)
}

// ValidateDelete implements admission.Validator; deleting is always allowed.
func (v *Validator) ValidateDelete(context.Context, *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	return nil, nil
}

func validate(old, p *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	warnings := policy.Warnings(old, p)
	if _, errs := policy.Compile(p); len(errs) > 0 {
		return warnings, apierrors.NewInvalid(policyv1alpha1.GroupVersion.WithKind("RateLimitPolicy").GroupKind(), p.Name, errs)
	}
	return warnings, nil
}
