package gateways_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ratelimit-dev/ratelimit-operator/hack/pinnedmod"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// Module paths of the gateway projects, as hack/gatewaycrds/go.mod requires them.
const (
	istioModule        = "istio.io/api"
	gatewayAPIModule   = "sigs.k8s.io/gateway-api"
	envoyGatewayModule = "github.com/envoyproxy/gateway"
	traefikModule      = "github.com/traefik/traefik/v3"
)

// crdLocations is where each module keeps its CRD YAML (files or directories of them,
// relative to the module's root). Gateway API's standard channel: what most clusters run, and
// the stricter schema for the objects config/gateways ships.
var crdLocations = map[string][]string{
	istioModule:        {"kubernetes/customresourcedefinitions.gen.yaml"},
	gatewayAPIModule:   {"config/crd/standard"},
	envoyGatewayModule: {"charts/gateway-helm/charts/crds/crds/generated"},
	traefikModule:      {"docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml"},
}

// gatewayModules maps a module path to the directory of its pinned version in the module
// cache.
type gatewayModules map[string]string

// crdPaths lists every CRD file and directory of the modules.
func (g gatewayModules) crdPaths() []string {
	var out []string
	for mod, rel := range crdLocations {
		for _, r := range rel {
			out = append(out, filepath.Join(g[mod], filepath.FromSlash(r)))
		}
	}
	return out
}

// pinDir is the module that pins the gateway projects' versions (and whose go.sum verifies
// their zips).
func pinDir() string { return filepath.Join(kube.RepoRoot(), "hack", "gatewaycrds") }

// downloadGatewayModules fetches the pinned modules into the module cache (pinnedmod, so a
// warm cache costs nothing and hack/gatewaycrds/go.sum verifies them) and checks each ships
// its CRDs where crdLocations says.
func downloadGatewayModules() (gatewayModules, error) {
	var names []string
	for mod := range crdLocations {
		names = append(names, mod)
	}
	dirs, err := pinnedmod.Download(pinDir(), names...)
	if err != nil {
		return nil, fmt.Errorf("gateway modules: %w", err)
	}
	mods := gatewayModules(dirs)
	for _, p := range mods.crdPaths() {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("pinned gateway module no longer ships its CRDs there: %w", err)
		}
	}
	return mods, nil
}
