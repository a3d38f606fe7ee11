// Package kube gives the suites under test/ a real kube-apiserver + etcd with the operator's
// CRDs installed (hack/controlplane, which `make demo` uses too), the admission webhooks
// served in-process, and small helpers for tests against it.
package kube

import (
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// Env is a running control plane with the operator's CRDs installed, and what runs beside it.
type Env struct {
	*controlplane.Env
	// Aggregation is the aggregation layer's configuration, when the suite asked for it.
	Aggregation *controlplane.Aggregation

	stops []func() // what runs beside the control plane (the webhook manager), stopped first
}

// Start builds the environment (controlplane.Start). extra adjusts the environment before
// start (e.g. WithWebhookConfigs).
func Start(extra ...func(*envtest.Environment)) (*Env, error) {
	e, err := controlplane.Start(extra...)
	if err != nil {
		return nil, err
	}
	return &Env{Env: e}, nil
}

// WithWebhookConfigs installs config/webhook's configurations (controlplane.WithWebhookConfigs).
func WithWebhookConfigs(e *envtest.Environment) { controlplane.WithWebhookConfigs(e) }

// Stop ends what runs beside the control plane, then the control plane.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	for _, stop := range e.stops {
		stop()
	}
	return e.Env.Stop()
}

// Require returns env when Start succeeded. Without a control plane it fails the test under
// CI=true (a missing part is a failure there) and skips it elsewhere, naming the command that
// fixes it. A control plane that started while the rest failed (env and startErr both set,
// as StartWebhooks returns them) is broken, not missing: that fails the test everywhere.
func Require(t testing.TB, env *Env, startErr error) *Env {
	t.Helper()
	if startErr == nil && env != nil {
		return env
	}
	if env != nil {
		t.Fatal(startErr)
	}
	missing.Part(t, "no envtest control plane (%v): run `make envtest` or `make test`", startErr)
	return nil
}

// AssetsDir is where kube-apiserver and etcd are (controlplane.AssetsDir).
func AssetsDir() (string, error) { return controlplane.AssetsDir() }

// RepoRoot is the repository's top directory (where go.mod is).
func RepoRoot() string { return controlplane.RepoRoot() }

// WriteKubeconfig writes a kubeconfig for cfg to path (controlplane.WriteKubeconfig).
func WriteKubeconfig(cfg *rest.Config, path string) error {
	return controlplane.WriteKubeconfig(cfg, path)
}

// WriteKubeconfigAs is WriteKubeconfig impersonating user (controlplane.WriteKubeconfigAs).
func WriteKubeconfigAs(cfg *rest.Config, path, user string) error {
	return controlplane.WriteKubeconfigAs(cfg, path, user)
}

// WriteTokenKubeconfig writes a kubeconfig whose user authenticates with token alone, in
// namespace ns (controlplane.WriteTokenKubeconfig).
func WriteTokenKubeconfig(cfg *rest.Config, path, token, ns string) error {
	return controlplane.WriteTokenKubeconfig(cfg, path, token, ns)
}
