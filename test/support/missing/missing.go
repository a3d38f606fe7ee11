// Package missing is the one rule for a test whose real part (a binary, a control plane) is
// not on this machine: under CI (environment CI=true) the test fails, elsewhere it skips.
package missing

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// InCI reports whether the CI environment variable is set to a true value.
func InCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// Part ends the test for want of a part: it fails under CI and skips elsewhere, saying msg.
func Part(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatal(msg + " (required under CI)")
	}
	t.Skip(msg)
}

// Tool is the path of the command name on PATH; without it the test ends as Part says,
// with hint on how to install it.
func Tool(t testing.TB, name, hint string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Part(t, "%s not found (%v): %s", name, err, hint)
	}
	return path
}
