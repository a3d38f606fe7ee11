// Package layout holds the checks on how the repository sits: production code never imports
// test code, a package is named for its folder, and no build output or large file is tracked
// (files_test.go).
package layout

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

const module = "github.com/ratelimit-dev/ratelimit-operator/"

// goList runs `go list -f format patterns...` at the repository's top and returns its lines.
func goList(t *testing.T, format string, patterns ...string) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"list", "-f", format}, patterns...)...)
	cmd.Dir = controlplane.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestProductionImportsNoTestCode: no package under api/, cmd/, internal/ or hack/ imports
// one under test/ (their non-test files; a _test.go file may).
func TestProductionImportsNoTestCode(t *testing.T) {
	for _, line := range goList(t, "{{.ImportPath}} {{join .Imports \" \"}}", "./api/...", "./cmd/...", "./internal/...", "./hack/...") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"test/") {
				t.Errorf("%s imports test code %s", strings.TrimPrefix(f[0], module), strings.TrimPrefix(imp, module))
			}
		}
	}
}

// TestPackagesNamedForTheirFolders: every package but a main is named for its folder.
func TestPackagesNamedForTheirFolders(t *testing.T) {
	for _, line := range goList(t, "{{.Dir}} {{.Name}}", "./...") {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] == "main" {
			continue
		}
		if base := filepath.Base(f[0]); base != f[1] {
			t.Errorf("%s holds package %s", f[0], f[1])
		}
	}
}
