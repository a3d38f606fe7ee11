// Command gen writes every composed script (scripts.Compose) to internal/scripts/generated,
// one file per family and body, and removes any other file there: `go generate
// ./internal/scripts` runs it from that package's directory.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

func main() {
	if err := run("generated"); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// run writes the scripts into dir.
func run(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	want := map[string]bool{}
	for _, c := range scripts.Compositions() {
		src, err := scripts.Compose(c.Family, c.Body)
		if err != nil {
			return err
		}
		name := scripts.FileName(c.Family, c.Body)
		want[name] = true
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil { //nolint:gosec // a source file of the repository
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, f := range old {
		if !want[filepath.Base(f)] {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("remove %s: %w", f, err)
			}
		}
	}
	return nil
}
