package manifests

import (
	"errors"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// InjectionWebhook is the sidecar injection MutatingWebhookConfiguration the chart renders
// (HelmTemplate of release in ns with sidecarInjection.enabled=true and the extra --set
// values), for a control plane to install as a cluster would have it.
func InjectionWebhook(release, ns string, set ...string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	docs, err := HelmTemplate(release, ns, append([]string{"sidecarInjection.enabled=true"}, set...)...)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		u := d.Object
		if u.GetKind() != "MutatingWebhookConfiguration" || !strings.HasSuffix(u.GetName(), "-sidecar-injection") {
			continue
		}
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, mwc); err != nil {
			return nil, fmt.Errorf("decode %s: %w", u.GetName(), err)
		}
		return mwc, nil
	}
	return nil, errors.New("the chart renders no sidecar injection MutatingWebhookConfiguration")
}
