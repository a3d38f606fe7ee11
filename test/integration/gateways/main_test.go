// Package gateways_test checks what config/service and config/gateways ship against the real
// schemas of the gateways they configure: the CRDs of Istio, Envoy Gateway, Gateway API and
// Traefik, taken from those projects' Go modules at the versions hack/gatewaycrds/go.mod pins,
// are installed into a real kube-apiserver (envtest); every rendered object is server-side
// applied there as a dry run; and the objects are checked to point at each other (the
// gateways at the Service and ports config/service defines).
package gateways_test

import (
	"os"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// cp is the control plane with the CRDs of the gateway modules installed; gw holds those
// modules, downloaded before it starts.
var (
	cp = &kube.Suite{Name: "gateways", CRDs: gw.download}
	gw gatewaySuite
)

// gatewaySuite is the pinned gateway modules on disk, or why they are not.
type gatewaySuite struct {
	modules gatewayModules
	err     error
}

// download fetches the pinned gateway modules and returns their CRD paths.
func (g *gatewaySuite) download() ([]string, error) {
	g.modules, g.err = downloadGatewayModules()
	if g.err != nil {
		return nil, g.err
	}
	return g.modules.crdPaths(), nil
}

func TestMain(m *testing.M) { os.Exit(cp.Run(m)) }

// modules returns the downloaded gateway modules; without them the test fails under CI=true
// and skips elsewhere.
func modules(t *testing.T) gatewayModules {
	t.Helper()
	if gw.err != nil {
		missing.Part(t, "gateway CRD modules pinned by hack/gatewaycrds/go.mod: %v", gw.err)
	}
	return gw.modules
}

// env returns the control plane with the gateways' CRDs, as modules and kube.Require decide.
func env(t *testing.T) *kube.Env {
	t.Helper()
	modules(t)
	return cp.Env(t)
}
