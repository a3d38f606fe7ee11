package gateways_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

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

// pinnedVersions reads the version of each module in crdLocations from pinDir's go.mod.
func pinnedVersions() (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(pinDir(), "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("read gateway module pins: %w", err)
	}
	versions := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && crdLocations[f[0]] != nil {
			versions[f[0]] = f[1]
		}
	}
	for mod := range crdLocations {
		if versions[mod] == "" {
			return nil, fmt.Errorf("hack/gatewaycrds/go.mod does not require %s", mod)
		}
	}
	return versions, nil
}

// downloadGatewayModules fetches the pinned modules into the module cache (GOMODCACHE, so a
// warm cache costs nothing) with `go mod download`, run in hack/gatewaycrds so go.sum there
// verifies them, and checks each ships its CRDs where crdLocations says.
func downloadGatewayModules() (gatewayModules, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("go not found to download the gateway modules: %w", err)
	}
	versions, err := pinnedVersions()
	if err != nil {
		return nil, err
	}
	args := []string{"mod", "download", "-json"}
	for mod, v := range versions {
		args = append(args, mod+"@"+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = pinDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	mods, err := parseDownloads(out)
	if err != nil {
		return nil, errors.Join(err, runErr, errors.New(stderr.String()))
	}
	if runErr != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), runErr, stderr.String())
	}
	for _, p := range mods.crdPaths() {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("pinned gateway module no longer ships its CRDs there: %w", err)
		}
	}
	return mods, nil
}

// parseDownloads reads the JSON objects `go mod download -json` prints, one per module.
func parseDownloads(out []byte) (gatewayModules, error) {
	mods := gatewayModules{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m struct{ Path, Version, Dir, Error string }
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("decode go mod download output: %w", err)
		}
		if m.Error != "" {
			return nil, fmt.Errorf("download %s@%s: %s", m.Path, m.Version, m.Error)
		}
		mods[m.Path] = m.Dir
	}
	for mod := range crdLocations {
		if mods[mod] == "" {
			return nil, fmt.Errorf("go mod download did not report %s", mod)
		}
	}
	return mods, nil
}
