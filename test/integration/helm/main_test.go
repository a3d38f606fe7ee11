// Package helm_test checks the Helm chart in charts/ratelimit-operator: it lints, renders
// with default and non-default values, refuses misspelt values (values.schema.json), every
// object it renders is accepted by a real kube-apiserver (envtest, server-side dry run, with
// the prometheus-operator's and cert-manager's CRDs installed), an install keeps its self-signed webhook
// certificate across upgrades, and, rendered with values that mirror config/default, it
// installs what `kubectl kustomize config/default` does.
package helm_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/hack/pinnedmod"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// externalCRDs are the CRD files of the kinds the chart renders beyond Kubernetes' own, by the
// module that ships them at the version hack/gatewaycrds/go.mod pins.
var externalCRDs = map[string][]string{
	"github.com/prometheus-operator/prometheus-operator": {
		"example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
		"example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
	},
	"github.com/cert-manager/cert-manager": {
		"deploy/crds/cert-manager.io_certificates.yaml",
		"deploy/crds/cert-manager.io_issuers.yaml",
	},
}

// cp is the control plane with the operator's CRD and externalCRDs.
var cp = &kube.Suite{Name: "helm", CRDs: externalCRDPaths}

// helm is what TestMain prepared: the helm binary, or why there is none.
var helm struct {
	path string
	err  error
}

func TestMain(m *testing.M) {
	helm.path, helm.err = manifests.HelmBinary()
	if helm.err != nil {
		fmt.Fprintf(os.Stderr, "helm: %v\n", helm.err)
	}
	os.Exit(cp.Run(m))
}

// externalCRDPaths downloads the modules of externalCRDs and returns the paths of their CRDs.
func externalCRDPaths() ([]string, error) {
	modules := slices.Sorted(maps.Keys(externalCRDs))
	mods, err := pinnedmod.Download(filepath.Join(kube.RepoRoot(), "hack", "gatewaycrds"), modules...)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, mod := range modules {
		for _, p := range externalCRDs[mod] {
			paths = append(paths, filepath.Join(mods[mod], filepath.FromSlash(p)))
		}
	}
	return paths, nil
}

// helmPath is the helm binary; without one the test fails under CI=true and skips elsewhere.
func helmPath(t *testing.T) string {
	t.Helper()
	if helm.err != nil {
		missing.Part(t, "helm (pinned in hack/tools/go.mod): %v", helm.err)
	}
	return helm.path
}

// env is the control plane, as kube.Require decides.
func env(t *testing.T) *kube.Env {
	t.Helper()
	return cp.Env(t)
}
