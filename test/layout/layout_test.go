// Package layout holds the checks on how the repository's packages sit: production code never
// imports test code, and a package is named for its folder.
package layout

import (
	"os/exec"
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
