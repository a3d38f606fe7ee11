package v1alpha1

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// decodeGuard answers an object with a field Go cannot decode (a duration such as `1y`, a
// string where a number goes) with an Invalid error on that field, before the typed webhook
// sees it. Without it the mutating webhook, which runs before the schema, refused such an
// object with a decoding error that named no field.
type decodeGuard struct {
	next admission.Handler
}

// Handle implements admission.Handler.
func (g decodeGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		if errs := policy.CheckDecodable(req.Object.Raw, &policyv1alpha1.RateLimitPolicy{}); len(errs) > 0 {
			gk := policyv1alpha1.GroupVersion.WithKind("RateLimitPolicy").GroupKind()
			status := apierrors.NewInvalid(gk, req.Name, errs).ErrStatus
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
		}
	}
	return g.next.Handle(ctx, req)
}
