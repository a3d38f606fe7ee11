// Package pinnedmod brings Go modules that a go.mod outside the operator's pins (such as
// hack/gatewaycrds/go.mod, which pins projects for the CRD YAML they ship) into the module
// cache and says where each one is, so tests read files from exactly the pinned versions.
package pinnedmod

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Download runs `go mod download -json` in dir for each module at the version dir's go.mod
// requires (so dir's go.sum verifies the zips; a warm GOMODCACHE costs nothing) and returns
// each module's directory in the module cache.
func Download(dir string, modules ...string) (map[string]string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("go not found to download pinned modules: %w", err)
	}
	versions, err := Versions(dir)
	if err != nil {
		return nil, err
	}
	args := []string{"mod", "download", "-json"}
	for _, mod := range modules {
		v, ok := versions[mod]
		if !ok {
			return nil, fmt.Errorf("%s does not require %s", filepath.Join(dir, "go.mod"), mod)
		}
		args = append(args, mod+"@"+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	dirs := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m struct{ Path, Dir, Error string }
		if err := dec.Decode(&m); err != nil {
			return nil, errors.Join(fmt.Errorf("decode go mod download output: %w", err), runErr)
		}
		if m.Error != "" {
			return nil, fmt.Errorf("download %s: %s", m.Path, m.Error)
		}
		dirs[m.Path] = m.Dir
	}
	if runErr != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), runErr, stderr.String())
	}
	for _, mod := range modules {
		if dirs[mod] == "" {
			return nil, fmt.Errorf("go mod download did not report %s", mod)
		}
	}
	return dirs, nil
}

// Versions reads the required version of each module from dir's go.mod.
func Versions(dir string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("read module pins: %w", err)
	}
	versions := map[string]string{}
	inRequire := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "require ("):
			inRequire = true
			continue
		case inRequire && line == ")":
			inRequire = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inRequire:
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 {
			versions[f[0]] = f[1]
		}
	}
	return versions, sc.Err()
}
