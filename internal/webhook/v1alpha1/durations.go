package v1alpha1

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
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
		if errs := checkDurations(req.Object.Raw); len(errs) > 0 {
			gk := policyv1alpha1.GroupVersion.WithKind("RateLimitPolicy").GroupKind()
			status := apierrors.NewInvalid(gk, req.Name, errs).ErrStatus
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
		}
	}
	return g.next.Handle(ctx, req)
}

// rawDurations holds the policy's duration fields as sent, undecoded.
type rawDurations struct {
	Spec struct {
		Limits []struct {
			Period json.RawMessage `json:"period"`
		} `json:"limits"`
		KeyLayout *struct {
			TTL json.RawMessage `json:"ttl"`
		} `json:"keyLayout"`
		LocalCap *struct {
			Period json.RawMessage `json:"period"`
		} `json:"localCap"`
		Idempotency *struct {
			TTL json.RawMessage `json:"ttl"`
		} `json:"idempotency"`
	} `json:"spec"`
}

// checkDurations reports every duration field of raw that is present but not a duration
// string Go can parse. A body that is not even JSON of that shape is left to the decoder.
func checkDurations(raw []byte) field.ErrorList {
	var d rawDurations
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	check := func(path *field.Path, v json.RawMessage) {
		if err := parseDuration(v); err != nil {
			errs = append(errs, field.Invalid(path, string(v), err.Error()))
		}
	}
	for i, l := range d.Spec.Limits {
		check(spec.Child("limits").Index(i).Child("period"), l.Period)
	}
	if kl := d.Spec.KeyLayout; kl != nil {
		check(spec.Child("keyLayout", "ttl"), kl.TTL)
	}
	if lc := d.Spec.LocalCap; lc != nil {
		check(spec.Child("localCap", "period"), lc.Period)
	}
	if id := d.Spec.Idempotency; id != nil {
		check(spec.Child("idempotency", "ttl"), id.TTL)
	}
	return errs
}

// parseDuration checks one raw duration value; absent (or null) is left to the schema.
func parseDuration(v json.RawMessage) error {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return fmt.Errorf("must be a duration string such as \"1s\", \"1m30s\" or \"500ms\", not %s", v)
	}
	if _, err := time.ParseDuration(s); err != nil {
		return fmt.Errorf("is not a duration (%w): write it with the units h, m, s and ms, such as \"1h\", \"1m30s\" or \"500ms\"", err)
	}
	return nil
}
