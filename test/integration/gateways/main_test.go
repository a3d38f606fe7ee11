// Package gateways_test checks what config/service and config/gateways ship against the real
// schemas of the gateways they configure: the CRDs of Istio, Envoy Gateway, Gateway API and
// Traefik, taken from those projects' Go modules at the versions hack/gatewaycrds/go.mod pins,
// are installed into a real kube-apiserver (envtest); every rendered object is server-side
// applied there as a dry run; and the objects are checked to point at each other (the
// gateways at the Service and ports config/service defines).
package gateways_test

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// suite is what TestMain prepared: the pinned gateway modules on disk and a control plane
// with their CRDs installed.
var suite struct {
	modules gatewayModules
	modErr  error
	env     *kube.Env
	envErr  error
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	suite.modules, suite.modErr = downloadGatewayModules()
	if suite.modErr != nil {
		fmt.Fprintf(os.Stderr, "gateways: %v\n", suite.modErr)
	} else {
		paths := suite.modules.crdPaths()
		suite.env, suite.envErr = kube.Start(func(te *envtest.Environment) {
			te.CRDDirectoryPaths = append(te.CRDDirectoryPaths, paths...)
		})
		if suite.envErr != nil {
			fmt.Fprintf(os.Stderr, "gateways: %v\n", suite.envErr)
		}
	}
	code := m.Run()
	if err := suite.env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "gateways: %v\n", err)
	}
	return code
}

// modules returns the downloaded gateway modules; without them the test fails under CI=true
// and skips elsewhere.
func modules(t *testing.T) gatewayModules {
	t.Helper()
	if suite.modErr != nil {
		missing.Part(t, "gateway CRD modules pinned by hack/gatewaycrds/go.mod: %v", suite.modErr)
	}
	return suite.modules
}

// env returns the control plane with the gateways' CRDs, as modules and kube.Require decide.
func env(t *testing.T) *kube.Env {
	t.Helper()
	modules(t)
	return kube.Require(t, suite.env, suite.envErr)
}
