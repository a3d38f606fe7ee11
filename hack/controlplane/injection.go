package controlplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// InjectionWebhook is the sidecar injection MutatingWebhookConfiguration the chart renders
// (HelmTemplate of release in ns with sidecarInjection.enabled=true and the extra --set
// values), for a control plane to install as a cluster would have it.
func InjectionWebhook(release, ns string, set ...string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	out, err := HelmTemplate(release, ns, append([]string{"sidecarInjection.enabled=true"}, set...)...)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the chart renders no sidecar injection MutatingWebhookConfiguration")
		}
		if err != nil {
			return nil, fmt.Errorf("read the chart's output: %w", err)
		}
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := yaml.Unmarshal(doc, mwc); err != nil || mwc.Kind != "MutatingWebhookConfiguration" ||
			!strings.HasSuffix(mwc.Name, "-sidecar-injection") {
			continue
		}
		return mwc, nil
	}
}

// WithInjectionWebhook is a Start option installing the chart's injection webhook
// configuration (InjectionWebhook), which envtest points at the local webhook server like
// the others.
func WithInjectionWebhook(mwc *admissionregistrationv1.MutatingWebhookConfiguration) func(*envtest.Environment) {
	return func(e *envtest.Environment) {
		e.WebhookInstallOptions.MutatingWebhooks = append(e.WebhookInstallOptions.MutatingWebhooks, mwc)
	}
}
