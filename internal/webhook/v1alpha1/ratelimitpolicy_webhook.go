// Package v1alpha1 holds the admission webhooks of RateLimitPolicy: defaulting (a safe key
// layout and TTL) and validation (Cluster-slot safety, TTL horizon, templates), both thin
// wrappers over internal/policy, which the controller calls too.
package v1alpha1

import (
	"context"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// Paths the webhooks are served on, as the kubebuilder markers below declare them.
const (
	// MutatePath serves the defaulting webhook.
	MutatePath = "/mutate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy"
	// ValidatePath serves the validating webhook.
	ValidatePath = "/validate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy"
)

// SetupRateLimitPolicyWebhookWithManager registers the defaulting and validating webhooks
// with the installation's rules (the controller holds the same), each behind a guard that
// names the field of a value it cannot decode.
func SetupRateLimitPolicyWebhookWithManager(mgr ctrl.Manager, rules policy.Rules) error {
	srv := mgr.GetWebhookServer()
	for path, wh := range map[string]*admission.Webhook{
		MutatePath:   admission.WithDefaulter(mgr.GetScheme(), &Defaulter{Rules: rules}),
		ValidatePath: admission.WithValidator(mgr.GetScheme(), &Validator{Rules: rules}),
	} {
		wh.Handler = decodeGuard{next: wh.Handler}
		wh.LogConstructor = logConstructor
		srv.Register(path, wh)
	}
	return nil
}

// logConstructor names the policy and the user of each admission request in its log lines.
func logConstructor(base logr.Logger, req *admission.Request) logr.Logger {
	log := base.WithValues("webhookKind", "RateLimitPolicy")
	if req != nil {
		log = log.WithValues("namespace", req.Namespace, "name", req.Name, "user", req.UserInfo.Username, "requestID", req.UID)
	}
	return log
}

// +kubebuilder:webhook:path=/mutate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy,mutating=true,failurePolicy=fail,sideEffects=None,groups=policy.ratelimit.dev,resources=ratelimitpolicies,verbs=create;update,versions=v1alpha1,name=mratelimitpolicy-v1alpha1.ratelimit.dev,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent

// Defaulter fills in a safe key layout in the namespace's scope and a TTL covering the
// algorithm's horizon.
type Defaulter struct {
	// Rules are the installation's settings (the key prefix of default layouts).
	Rules policy.Rules
}

var _ admission.Defaulter[*policyv1alpha1.RateLimitPolicy] = &Defaulter{}

// Default implements admission.Defaulter.
func (d *Defaulter) Default(ctx context.Context, p *policyv1alpha1.RateLimitPolicy) error {
	d.Rules.Default(p)
	logf.FromContext(ctx).V(1).Info("defaulted policy", "policy", p.Namespace+"/"+p.Name,
		"stateKey", p.Spec.KeyLayout.State, "ttl", p.Spec.KeyLayout.TTL)
	return nil
}

// +kubebuilder:webhook:path=/validate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=policy.ratelimit.dev,resources=ratelimitpolicies,verbs=create;update,versions=v1alpha1,name=vratelimitpolicy-v1alpha1.ratelimit.dev,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent

// Validator refuses policies whose keys would leave their namespace's scope or cross Cluster
// slots, that lack or undercut a TTL, or that the limiter's scripts cannot run, and warns
// about hot slots, FailOpen on sensitive paths and changes that orphan live counters.
type Validator struct {
	// Rules are the installation's settings (the key prefix every key must begin with).
	Rules policy.Rules
}

var _ admission.Validator[*policyv1alpha1.RateLimitPolicy] = &Validator{}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(_ context.Context, p *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	return v.validate(nil, p)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(_ context.Context, old, p *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	return v.validate(old, p)
}

// ValidateDelete implements admission.Validator; deleting is always allowed.
func (v *Validator) ValidateDelete(context.Context, *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) validate(old, p *policyv1alpha1.RateLimitPolicy) (admission.Warnings, error) {
	warnings := policy.Warnings(old, p)
	if errs := v.Rules.Validate(p); len(errs) > 0 {
		return warnings, apierrors.NewInvalid(policyv1alpha1.GroupVersion.WithKind("RateLimitPolicy").GroupKind(), p.Name, errs)
	}
	return warnings, nil
}
