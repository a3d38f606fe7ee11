package pinnedmod

import (
	"os"
	"path/filepath"
	"testing"
)

// TestVersions reads single-line and block requirements, skipping comments and other
// directives.
func TestVersions(t *testing.T) {
	dir := t.TempDir()
	mod := `// a comment naming example.com/not v9.9.9
module example.com/pins

go 1.26.0

require example.com/single v1.0.0

require (
	example.com/a v1.2.3
	example.com/b/v2 v2.0.0 // indirect
)

replace example.com/c => ./c
`
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Versions(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"example.com/single": "v1.0.0", "example.com/a": "v1.2.3", "example.com/b/v2": "v2.0.0"}
	if len(got) != len(want) {
		t.Errorf("Versions = %v, want %v", got, want)
	}
	for m, v := range want {
		if got[m] != v {
			t.Errorf("%s: %q, want %q", m, got[m], v)
		}
	}
}

// TestDownloadUnpinned: asking for a module the go.mod does not require is an error, before
// anything is downloaded.
func TestDownloadUnpinned(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/pins\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Download(dir, "example.com/missing"); err == nil {
		t.Error("Download of an unpinned module succeeded")
	}
}
