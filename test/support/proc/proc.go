// Package proc is what the tests that run this repository's binaries share: building a
// command, and a buffer for a process's output that the test may read while it runs.
package proc

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// Build compiles this repository's command pkg ("cmd/manager") into dir and returns the
// binary's path.
func Build(ctx context.Context, dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+pkg)
	cmd.Dir = kube.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./%s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// MustBuild is Build into a directory of the test's own (within 5 minutes), failing the test
// when pkg does not build.
func MustBuild(t testing.TB, pkg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := Build(ctx, t.TempDir(), pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Buffer is a process's output: written by the process while the test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
