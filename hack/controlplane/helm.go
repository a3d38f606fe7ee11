package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// HelmBinary is $HELM when set, else the helm pinned in hack/tools/go.mod, built (once; then
// cached by the go command) with `go tool -n`.
func HelmBinary() (string, error) {
	if h := os.Getenv("HELM"); h != "" {
		return h, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go not found to build the pinned helm: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "tool", "-modfile=hack/tools/go.mod", "-n", "helm")
	cmd.Dir = RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool -modfile=hack/tools/go.mod -n helm: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// HelmTemplate renders charts/ratelimit-operator with `helm template release chart
// --namespace ns` and the --set values, away from the user's Helm config and any cluster,
// and returns the YAML stream.
func HelmTemplate(release, ns string, set ...string) ([]byte, error) {
	helm, err := HelmBinary()
	if err != nil {
		return nil, err
	}
	args := []string{"template", release, filepath.Join(RepoRoot(), "charts", "ratelimit-operator"), "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home, err := os.MkdirTemp("", "helm-home-")
	if err != nil {
		return nil, fmt.Errorf("helm home: %w", err)
	}
	defer func() { _ = os.RemoveAll(home) }()
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home,
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
