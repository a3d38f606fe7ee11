// Package injection runs the sidecar injection webhook (internal/webhook/podinject) behind a
// real kube-apiserver (envtest) with the MutatingWebhookConfiguration exactly as the Helm chart
// renders it (selectors, failure policy), rewritten by envtest to call a webhook server on
// loopback, and creates Pods the way a ReplicaSet would: opted-in ones get the sidecar,
// others are stored as submitted, and with the webhook down only opted-in ones are refused.
package injection

import (
	"fmt"
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// The release the chart is rendered as: its namespace is never injected.
const (
	release       = "rl"
	releaseNS     = "ratelimit-system"
	injectionName = release + "-ratelimit-operator-sidecar-injection"
	injectedImage = "ratelimit-operator:0.1.0" // the chart's image at its appVersion
)

// suite is the control plane with the chart's injection webhook configuration installed and
// the injection webhook serving.
var suite struct {
	env      *kube.Env
	err      error
	injector *injector
}

func TestMain(m *testing.M) {
	suite.env, suite.err = start()
	if suite.err != nil {
		fmt.Fprintf(os.Stderr, "injection: %v\n", suite.err)
	}
	code := m.Run()
	if suite.injector != nil {
		suite.injector.stop()
	}
	if err := suite.env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "injection: %v\n", err)
	}
	os.Exit(code)
}

// start renders the chart's injection webhook configuration, starts the control plane with
// it installed, and starts the webhook server.
func start() (*kube.Env, error) {
	mwc, err := chartInjectionConfig()
	if err != nil {
		return nil, err
	}
	e, err := kube.Start(func(te *envtest.Environment) {
		te.WebhookInstallOptions = envtest.WebhookInstallOptions{
			MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{mwc},
		}
	})
	if err != nil {
		return nil, err
	}
	suite.injector = &injector{env: e}
	if err := suite.injector.start(); err != nil {
		return e, fmt.Errorf("injection webhook: %w", err)
	}
	return e, nil
}

// chartInjectionConfig is the sidecar injection MutatingWebhookConfiguration of
// `helm template` with sidecarInjection.enabled=true.
func chartInjectionConfig() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return controlplane.InjectionWebhook(release, releaseNS)
}

// env is the control plane, as kube.Require decides.
func env(t *testing.T) *kube.Env {
	t.Helper()
	return kube.Require(t, suite.env, suite.err)
}
