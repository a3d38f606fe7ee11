// Package redistest (import path test/support/redis; the name does not shadow go-redis)
// starts real redis-server processes on loopback for tests: single servers
// (StartServer) and Redis Cluster deployments (StartCluster). Every server runs in its own
// temporary directory on a free port and is stopped by its PID when the test ends, so suites
// can run in parallel on a shared machine without touching any system-wide Redis.
//
// The redis-server binary comes from PATH, or from the REDIS_SERVER_BIN environment variable
// when set. Install it with `make redis` (hack/redis.sh).
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// ServerBinEnv names the environment variable that overrides the redis-server binary path.
const ServerBinEnv = "REDIS_SERVER_BIN"

const installHint = "install it with `make redis` (runs hack/redis.sh), or set " + ServerBinEnv

// RequireRedis returns the path of the redis-server binary. When it is missing the test is
// skipped, except under CI (environment CI=true), where a missing binary fails the test.
func RequireRedis(t testing.TB) string {
	t.Helper()
	path, err := serverBin()
	if err == nil {
		return path
	}
	missing.Part(t, "redistest: redis-server not available: %v; %s", err, installHint)
	return ""
}

// serverBin resolves the redis-server binary from REDIS_SERVER_BIN or PATH.
func serverBin() (string, error) {
	if p := os.Getenv(ServerBinEnv); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%q: %w", ServerBinEnv, p, err)
		}
		return path, nil
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("look up redis-server: %w", err)
	}
	return path, nil
}

var versionCache sync.Map // binary path -> [2]int{major, minor}

// serverVersion returns the major and minor version of the redis-server binary at path.
func serverVersion(path string) (major, minor int, err error) {
	if v, ok := versionCache.Load(path); ok {
		mm := v.([2]int)
		return mm[0], mm[1], nil
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("%s --version: %w", path, err)
	}
	major, minor, err = parseVersion(string(out))
	if err != nil {
		return 0, 0, err
	}
	versionCache.Store(path, [2]int{major, minor})
	return major, minor, nil
}

// parseVersion extracts major.minor from `redis-server --version` output ("... v=7.0.15 ...").
func parseVersion(out string) (major, minor int, err error) {
	for _, f := range strings.Fields(out) {
		v, ok := strings.CutPrefix(f, "v=")
		if !ok {
			continue
		}
		parts := strings.SplitN(v, ".", 3)
		if len(parts) < 2 {
			break
		}
		maj, errMaj := strconv.Atoi(parts[0])
		mnr, errMin := strconv.Atoi(parts[1])
		if err := errors.Join(errMaj, errMin); err != nil {
			return 0, 0, fmt.Errorf("parse redis version %q: %w", v, err)
		}
		return maj, mnr, nil
	}
	return 0, 0, fmt.Errorf("no version in %q", strings.TrimSpace(out))
}

// tailFile returns the last n lines of the file at path, or a note why it could not be read.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
