package v1alpha1

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// durationGuard answers an object whose durations cannot be decoded with an Invalid error on
// the field, before the typed webhook sees it. Without it the mutating webhook, which runs
// before the schema, refused `period: 1y` with a decoding error that named no field.
type durationGuard struct {
	next admission.Handler
}

// Handle implements admission.Handler.
func (g durationGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		if errs := policy.CheckDurations(req.Object.Raw, &policyv1alpha1.RateLimitPolicy{}); len(errs) > 0 {
			gk := policyv1alpha1.GroupVersion.WithKind("RateLimitPolicy").GroupKind()
			status := apierrors.NewInvalid(gk, req.Name, errs).ErrStatus
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
		}
	}
	return g.next.Handle(ctx, req)
}
