// Package golden holds a test's output to a file under testdata: byte for byte, and the test
// rewrites the file when it runs with -update (go test ./pkg -args -update).
package golden

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Check fails t when got, plus a final newline, differs from the file at path; what names
// the output in the failure. With -update it writes got to path first. It returns the file's
// content without its final newline.
func Check(t testing.TB, path string, got []byte, what string) []byte {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, append(bytes.Clone(got), '\n'), 0o644); err != nil {
			t.Fatalf("update %s: %v", path, err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	want = bytes.TrimSuffix(want, []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Fatalf("%s changed (%s):\n got %s\nwant %s", what, path, got, want)
	}
	return want
}
