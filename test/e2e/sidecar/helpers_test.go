package sidecar_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const namespace = "shop"

// keyPolicy limits requests per minute per X-API-Key on /api.
func keyPolicy(name string, requests int64) *v1alpha1.RateLimitPolicy {
	return policytest.New(namespace, name, policytest.OnMissing(v1alpha1.MissingIdentityShared),
		policytest.Limit("per-minute", requests, time.Minute), policytest.FailureMode(v1alpha1.FailureModeFailClosed))
}

// document is a sealed snapshot of policies, compiled as the controller does.
func document(t *testing.T, redisAddr string, policies ...*v1alpha1.RateLimitPolicy) []byte {
	t.Helper()
	return snapshottest.Document(t, namespace, redisAddr, policies...)
}

// volume is a directory laid out like a kubelet ConfigMap volume.
type volume struct {
	t   *testing.T
	dir string
	n   int
}

func (v *volume) path() string { return filepath.Join(v.dir, snapshot.DataKey) }

// publish swaps in data the way the kubelet does: a new timestamped directory, then an
// atomic rename of the ..data symlink.
func (v *volume) publish(data []byte) {
	v.t.Helper()
	v.n++
	ts := filepath.Join(v.dir, "..ts-"+strings.Repeat("x", v.n))
	must(v.t, os.Mkdir(ts, 0o755))
	must(v.t, os.WriteFile(filepath.Join(ts, snapshot.DataKey), data, 0o644))
	tmp := filepath.Join(v.dir, "..data_tmp")
	must(v.t, os.Symlink(filepath.Base(ts), tmp))
	must(v.t, os.Rename(tmp, filepath.Join(v.dir, "..data")))
	if _, err := os.Lstat(v.path()); err != nil {
		must(v.t, os.Symlink(filepath.Join("..data", snapshot.DataKey), v.path()))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startSidecar starts the sidecar binary bin with args (proc.Start, its stdout discarded).
func startSidecar(t *testing.T, bin string, args ...string) *proc.Process {
	t.Helper()
	return startSidecarEnv(t, bin, nil, args...)
}

// startSidecarEnv is startSidecar with the environment env (nil: the test's own).
func startSidecarEnv(t *testing.T, bin string, env []string, args ...string) *proc.Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Env = io.Discard, env
	return proc.Start(t, "sidecar", cmd)
}

// waitOK polls url until it answers 200, failing when the sidecar exits or 30s pass.
func waitOK(t *testing.T, p *proc.Process, url string) {
	t.Helper()
	wait.HTTPStatus(t, nil, url, 200, 30*time.Second, p.Gone)
}
