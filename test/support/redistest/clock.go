package redistest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

//go:embed clockshim/clock.c
var clockSource []byte

// Clock is the controlled wall clock of servers started WithClock: their TIME (what scripts
// read), key expiry and logs run at the real rate from the instant Set last gave.
type Clock struct {
	file string
	mu   sync.Mutex
}

// NewClock builds the clock shim (gcc, once per test binary) and returns a clock at the real
// time. Without a C compiler the test is skipped, or fails under CI.
func NewClock(t testing.TB) *Clock {
	t.Helper()
	if _, err := clockLib(); err != nil {
		missing.Part(t, "redistest: the clock shim cannot be built: %v; install gcc", err)
	}
	c := &Clock{file: filepath.Join(t.TempDir(), "clock-offset")}
	c.setOffset(t, 0)
	return c
}

// Set moves the clock so that it reads at now (and runs on from there).
func (c *Clock) Set(t testing.TB, at time.Time) {
	t.Helper()
	c.setOffset(t, time.Until(at))
}

// setOffset writes the offset the shim adds to the real clock. The file is replaced by a
// rename, so a server never reads half an offset.
func (c *Clock) setOffset(t testing.TB, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(int64(d), 10)), 0o600); err != nil {
		t.Fatalf("redistest: write clock: %v", err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		t.Fatalf("redistest: write clock: %v", err)
	}
}

// WithClock runs the server on c: redis-server with the shim preloaded.
func WithClock(c *Clock) Option {
	return func(cfg *config) {
		lib, _ := clockLib() // built by NewClock
		cfg.env = append(cfg.env, "LD_PRELOAD="+lib, "REDISTEST_CLOCK_FILE="+c.file)
	}
}

var (
	clockOnce sync.Once
	clockPath string
	clockErr  error
)

// clockLib compiles clock.c into a shared object in the user's cache directory, named by
// the source's hash (so it is built once per change, and never piles up), once per process.
func clockLib() (string, error) {
	clockOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		sum := sha256.Sum256(clockSource)
		dir := filepath.Join(cache, "ratelimit-operator", "redistest-clock-"+hex.EncodeToString(sum[:8]))
		lib := filepath.Join(dir, "clock.so")
		if _, err := os.Stat(lib); err == nil {
			clockPath = lib
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			clockErr = err
			return
		}
		src, tmp := filepath.Join(dir, "clock.c"), filepath.Join(dir, fmt.Sprintf("clock.so.%d", os.Getpid()))
		if err := os.WriteFile(src, clockSource, 0o600); err != nil {
			clockErr = err
			return
		}
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "gcc"
		}
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", tmp, src).CombinedOutput(); err != nil {
			clockErr = fmt.Errorf("%s clock.c: %w: %s", cc, err, out)
			return
		}
		if clockErr = os.Rename(tmp, lib); clockErr == nil {
			clockPath = lib
		}
	})
	return clockPath, clockErr
}
