// Package cluster gives a test suite a real Kubernetes cluster with the operator's image in
// it: the single-node cluster hack/cluster/cluster.sh runs on this machine (images built
// with podman from the Dockerfile and imported into its containerd), or, when KUBECONFIG and
// E2E_IMAGE are set (`make e2e`), the user's own cluster, which pulls the images itself.
package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// Images are the image references the suite deploys.
type Images struct {
	// Operator is the manager and sidecar image; Upgrade is the image `helm upgrade` moves
	// to (on this machine the same image under a second tag).
	Operator, Upgrade string
	// Redis, Agnhost (the example app's upstream) and Caddy (a gateway).
	Redis, Agnhost, Caddy string
}

// Cluster is a running cluster.
type Cluster struct {
	Kubeconfig string
	// Local is true for this machine's own cluster (hack/cluster), false for `make e2e`.
	Local  bool
	Images Images
	// Timings measured while starting it, for the suite's report.
	Timings map[string]time.Duration

	kubectl, helm string
	tmp           string
	reused        bool // CLUSTER_REUSE=1 found one up: not ours to stop
}

// Start brings up (or attaches to) the cluster. The error says which part is missing.
func Start(ctx context.Context) (*Cluster, error) {
	c := &Cluster{Timings: map[string]time.Duration{}}
	var err error
	if c.kubectl, err = tool(ctx, "KUBECTL_PINNED", "hack/kubectl.sh", "--pinned"); err != nil {
		return nil, err
	}
	if c.helm, err = helmBinary(ctx); err != nil {
		return nil, err
	}
	if kc := os.Getenv("KUBECONFIG"); kc != "" && os.Getenv("E2E_IMAGE") != "" {
		return c.attach(kc)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("a local cluster needs root (iptables, mounts, cgroups); or set KUBECONFIG and E2E_IMAGE (`make e2e`)")
	}
	if c.tmp, err = os.MkdirTemp("", "ratelimit-cluster-images-"); err != nil {
		return nil, err
	}
	if err := c.buildImages(ctx); err != nil {
		return nil, err
	}
	c.Local = true
	if os.Getenv("CLUSTER_REUSE") == "1" {
		// A cluster a developer brought up with hack/cluster/cluster.sh up: used, kept.
		if out, err := script(ctx, nil, "hack/cluster/cluster.sh", "status"); err == nil {
			c.Kubeconfig = strings.TrimSpace(lastLine(out))
			c.reused = true
		}
	}
	if c.Kubeconfig == "" {
		t0 := time.Now()
		out, err := script(ctx, []string{"CLUSTER_LOCK_WAIT=1800"}, "hack/cluster/cluster.sh", "up")
		if err != nil {
			return nil, err
		}
		c.Timings["cluster up"] = time.Since(t0)
		c.Kubeconfig = strings.TrimSpace(lastLine(out))
	}
	t0 := time.Now()
	tars, _ := filepath.Glob(filepath.Join(c.tmp, "*.tar"))
	if _, err := script(ctx, nil, "hack/cluster/cluster.sh", append([]string{"import"}, tars...)...); err != nil {
		_ = c.Stop()
		return nil, err
	}
	c.Timings["image import"] = time.Since(t0)
	return c, nil
}

// attach uses the cluster KUBECONFIG names, with the images the environment names.
func (c *Cluster) attach(kubeconfig string) (*Cluster, error) {
	c.Kubeconfig = kubeconfig
	c.Images = Images{
		Operator: os.Getenv("E2E_IMAGE"),
		Upgrade:  envOr("E2E_UPGRADE_IMAGE", os.Getenv("E2E_IMAGE")),
		Redis:    envOr("E2E_REDIS_IMAGE", "docker.io/library/redis:7.2"),
		Agnhost:  envOr("E2E_AGNHOST_IMAGE", "registry.k8s.io/e2e-test-images/agnhost:2.53"),
		Caddy:    envOr("E2E_CADDY_IMAGE", "docker.io/library/caddy:2.6"),
	}
	return c, nil
}

// buildImages builds every image into podman's storage and saves each as an archive in tmp.
func (c *Cluster) buildImages(ctx context.Context) error {
	t0 := time.Now()
	c.Images.Operator = "localhost/ratelimit-operator:e2e"
	c.Images.Upgrade = "localhost/ratelimit-operator:e2e-upgrade"
	if _, err := script(ctx, nil, "hack/cluster/images.sh", "operator", c.Images.Operator, filepath.Join(c.tmp, "operator.tar")); err != nil {
		return err
	}
	c.Timings["operator image build"] = time.Since(t0)
	if _, err := script(ctx, nil, "hack/cluster/images.sh", "retag", c.Images.Operator, c.Images.Upgrade, filepath.Join(c.tmp, "upgrade.tar")); err != nil {
		return err
	}
	t0 = time.Now()
	for _, img := range []struct {
		name string
		ref  *string
	}{{"redis", &c.Images.Redis}, {"agnhost", &c.Images.Agnhost}, {"caddy", &c.Images.Caddy}} {
		out, err := script(ctx, nil, "hack/cluster/images.sh", img.name, filepath.Join(c.tmp, img.name+".tar"))
		if err != nil {
			return err
		}
		*img.ref = strings.TrimSpace(lastLine(out))
	}
	c.Timings["other images"] = time.Since(t0)
	return nil
}

// Stop tears a local cluster down, unless CLUSTER_KEEP=1 asks to keep it for a look or
// CLUSTER_REUSE=1 found it up.
func (c *Cluster) Stop() error {
	if c == nil || !c.Local {
		return nil
	}
	defer func() { _ = os.RemoveAll(c.tmp) }()
	if c.reused || os.Getenv("CLUSTER_KEEP") == "1" {
		fmt.Fprintf(os.Stderr, "cluster: kept up (CLUSTER_KEEP=1): KUBECONFIG=%s; hack/cluster/cluster.sh down ends it\n", c.Kubeconfig)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := script(ctx, nil, "hack/cluster/cluster.sh", "down")
	return err
}

// Logs is the tail of a local cluster component's log (kubelet, kube-apiserver, ...).
func (c *Cluster) Logs(component string, lines int) string {
	if !c.Local {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(envOr("CLUSTER_STATE_DIR", "/var/lib/ratelimit-cluster"), "logs", component+".log"))
	if err != nil {
		return err.Error()
	}
	l := strings.Split(string(data), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Kubectl runs the pinned kubectl against the cluster; stdin may be nil.
func (c *Cluster) Kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	return c.run(ctx, c.kubectl, stdin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

// Helm runs the pinned helm against the cluster.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, c.helm, nil, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

func (c *Cluster) run(ctx context.Context, bin string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = kube.RepoRoot()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(bin), strings.Join(args[2:], " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// script runs a script of this repository and returns its stdout; its stderr (progress)
// goes to the test's stderr.
func script(ctx context.Context, env []string, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(kube.RepoRoot(), path), args...)
	cmd.Dir = kube.RepoRoot()
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// tool is $envName, else the path the script prints.
func tool(ctx context.Context, envName, path string, args ...string) (string, error) {
	if v := os.Getenv(envName); v != "" {
		return v, nil
	}
	out, err := script(ctx, nil, path, args...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(lastLine(out)), nil
}

// helmBinary is $HELM, else the helm pinned in hack/tools/go.mod (`go tool -n`).
func helmBinary(ctx context.Context) (string, error) {
	if h := os.Getenv("HELM"); h != "" {
		return h, nil
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile=hack/tools/go.mod", "-n", "helm")
	cmd.Dir = kube.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n helm: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
