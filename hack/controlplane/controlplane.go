// Package controlplane starts a real kube-apiserver + etcd (controller-runtime envtest) with
// the operator's CRDs installed, for `make demo` (hack/demo) and the test suites
// (test/support/kube) alike. The binaries come from hack/envtest.sh (`make envtest`), found
// through KUBEBUILDER_ASSETS or the cache it fills.
package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
)

// Env is a running control plane with the operator's CRDs installed.
type Env struct {
	// Environment is the envtest environment; Stop ends it.
	Environment *envtest.Environment
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client with the operator's types registered.
	Client client.Client
}

// Start builds the environment: kube-apiserver and etcd on loopback, CRDs from config/crd
// installed and established. extra adjusts the environment before start (e.g. webhooks).
func Start(extra ...func(*envtest.Environment)) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	for _, f := range extra {
		f(te)
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest control plane from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("create client: %w", err)
	}
	return &Env{Environment: te, Config: cfg, Client: c}, nil
}

// Stop ends the control plane.
func (e *Env) Stop() error {
	if err := e.Environment.Stop(); err != nil {
		return fmt.Errorf("stop envtest: %w", err)
	}
	return nil
}

// WithWebhookConfigs is a Start option that installs the webhook configurations of
// config/webhook, rewritten by envtest to call a webhook server on this machine.
func WithWebhookConfigs(e *envtest.Environment) {
	e.WebhookInstallOptions = envtest.WebhookInstallOptions{
		// The directory also holds kustomization.yaml and service.yaml; envtest only
		// installs the Mutating/ValidatingWebhookConfigurations it finds.
		Paths: []string{filepath.Join(RepoRoot(), "config", "webhook")},
	}
}

// AssetsDir finds the directory holding kube-apiserver and etcd: KUBEBUILDER_ASSETS when set,
// else the cache hack/envtest.sh fills for the version pinned in hack/envtest/go.mod.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		var err error
		if dir, err = defaultAssetsDir(); err != nil {
			return "", err
		}
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("envtest binary %s: %w", bin, err)
		}
	}
	return dir, nil
}

func defaultAssetsDir() (string, error) {
	mod, err := os.ReadFile(filepath.Join(RepoRoot(), "hack", "envtest", "go.mod"))
	if err != nil {
		return "", fmt.Errorf("read pinned envtest version: %w", err)
	}
	var version string
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "k8s.io/kubernetes" {
			version = strings.TrimPrefix(f[1], "v")
		}
	}
	if version == "" {
		return "", errors.New("hack/envtest/go.mod does not pin k8s.io/kubernetes")
	}
	cache := os.Getenv("ENVTEST_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find envtest cache: %w", err)
		}
		cache = filepath.Join(home, ".local", "share", "kubebuilder-envtest")
	}
	return filepath.Join(cache, "k8s", version+"-linux-"+runtime.GOARCH), nil
}

// RepoRoot is the repository's top directory (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
