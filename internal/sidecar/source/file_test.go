package source_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/source"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// srcWait bounds every wait for a source to react.
const srcWait = 5 * time.Second

// srcParseSink is a Sink that installs a document only when snapshot.Parse accepts it, like
// the real one, and counts the calls.
type srcParseSink struct {
	mu       sync.Mutex
	attempts int
	clears   int
	current  *snapshot.Snapshot
}

// Clear records that the source saw no snapshot at all.
func (s *srcParseSink) Clear(string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clears++
	s.current = nil
}

func (s *srcParseSink) clearCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clears
}

var _ source.Sink = (*srcParseSink)(nil)

func (s *srcParseSink) Load(data []byte, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	snap, err := snapshot.Parse(data)
	if err != nil {
		return err
	}
	s.current = snap
	return nil
}

// state is the number of Load calls and the installed version ("" before any).
func (s *srcParseSink) state() (attempts int, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil {
		version = s.current.Version
	}
	return s.attempts, version
}

// srcErrors records what a source passes to OnError.
type srcErrors struct {
	mu   sync.Mutex
	errs []error
}

func (e *srcErrors) record(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *srcErrors) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.errs)
}

func (e *srcErrors) last() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) == 0 {
		return nil
	}
	return e.errs[len(e.errs)-1]
}

// srcLogs is a logger (verbosity 1) that keeps its lines for assertions and echoes them to
// the test log until the test stops its sources.
type srcLogs struct {
	t      testing.TB
	mu     sync.Mutex
	lines  []string
	closed bool
}

func srcLogger(t testing.TB) (logr.Logger, *srcLogs) {
	l := &srcLogs{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
	})
	return funcr.New(l.add, funcr.Options{Verbosity: 1}), l
}

func (l *srcLogs) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := prefix + " " + args
	l.lines = append(l.lines, line)
	if !l.closed {
		l.t.Log(line)
	}
}

// count is the number of lines containing s.
func (l *srcLogs) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// srcEventually polls cond until it holds, failing the test after srcWait.
func srcEventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(srcWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", srcWait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// srcWaitLoaded waits until the sink holds version after exactly attempts Load calls.
func srcWaitLoaded(t testing.TB, sink *srcParseSink, attempts int, version string) {
	t.Helper()
	srcEventually(t, "snapshot "+version+" loaded", func() bool {
		_, v := sink.state()
		return v == version
	})
	if n, _ := sink.state(); n != attempts {
		t.Fatalf("sink saw %d Load calls, want %d", n, attempts)
	}
}

// srcRun runs a source until the test ends, then checks it returned nil on cancel.
func srcRun(t testing.TB, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("source returned %v on cancel, want nil", err)
			}
		case <-time.After(srcWait):
			t.Errorf("source did not stop within %v of cancel", srcWait)
		}
	})
}

// srcDoc is a sealed snapshot of namespace shop with one policy allowing requests per
// second: each requests value gives another version.
func srcDoc(t testing.TB, requests int64) (data []byte, version string) {
	t.Helper()
	p := sidecartest.Policy("orders", requests, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Limits = []v1alpha1.Limit{{Name: "per-second", Requests: requests, Period: metav1.Duration{Duration: time.Second}}}
	})
	s := snapshottest.Build(t, sidecartest.Namespace, "127.0.0.1:6379", p)
	data, err := s.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return data, s.Version
}

// srcVolume is a directory laid out and updated the way the kubelet's atomic writer does for
// a ConfigMap volume: the payload lives in a timestamped directory, ..data is a symlink to it,
// and snapshot.json is a symlink to ..data/snapshot.json.
type srcVolume struct {
	t   testing.TB
	dir string
	old string // the current timestamped directory
}

// publish writes a new payload: new timestamped directory, ..data_tmp symlink renamed over
// ..data, user-visible symlink created the first time, previous directory removed.
func (v *srcVolume) publish(data []byte) {
	v.t.Helper()
	ts, err := os.MkdirTemp(v.dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, snapshot.DataKey), data, 0o644); err != nil {
		v.t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
	user := filepath.Join(v.dir, snapshot.DataKey)
	if _, err := os.Lstat(user); errors.Is(err, fs.ErrNotExist) {
		if err := os.Symlink(filepath.Join("..data", snapshot.DataKey), user); err != nil {
			v.t.Fatal(err)
		}
	}
	if v.old != "" {
		if err := os.RemoveAll(v.old); err != nil {
			v.t.Fatal(err)
		}
	}
	v.old = ts
}

// path is the file a sidecar is pointed at.
func (v *srcVolume) path() string { return filepath.Join(v.dir, snapshot.DataKey) }

func TestFileSourceKubeletAtomicSwap(t *testing.T) {
	vol := &srcVolume{t: t, dir: t.TempDir()}
	v1, ver1 := srcDoc(t, 10)
	vol.publish(v1)
	sink, errs := &srcParseSink{}, &srcErrors{}
	log, _ := srcLogger(t)
	src := &source.File{Path: vol.path(), Sink: sink, Log: log, Poll: 20 * time.Millisecond, OnError: errs.record}
	srcRun(t, src.Run)
	srcWaitLoaded(t, sink, 1, ver1)

	v2, ver2 := srcDoc(t, 20)
	vol.publish(v2)
	srcWaitLoaded(t, sink, 2, ver2)

	// Same bytes in a new timestamped directory: not handed over again (had they been, the
	// next version would arrive as the 4th Load call).
	vol.publish(v2)
	v3, ver3 := srcDoc(t, 30)
	vol.publish(v3)
	srcWaitLoaded(t, sink, 3, ver3)

	// A truncated document is refused: the sink keeps v3, OnError hears of it once.
	v4, _ := srcDoc(t, 40)
	vol.publish(v4[:len(v4)/2])
	srcEventually(t, "OnError for the truncated snapshot", func() bool { return errs.count() == 1 })
	if n, v := sink.state(); n != 4 || v != ver3 {
		t.Fatalf("after truncated swap: %d Load calls, version %s; want 4, %s", n, v, ver3)
	}

	v5, ver5 := srcDoc(t, 50)
	vol.publish(v5)
	srcWaitLoaded(t, sink, 5, ver5)

	// Over snapshot.MaxBytes: refused without calling the sink.
	vol.publish(bytes.Repeat([]byte{' '}, snapshot.MaxBytes+1))
	srcEventually(t, "OnError for the oversized snapshot", func() bool { return errs.count() == 2 })
	if err := errs.last(); !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("oversized snapshot error %q does not say it exceeds the limit", err)
	}
	if n, v := sink.state(); n != 5 || v != ver5 {
		t.Fatalf("after oversized swap: %d Load calls, version %s; want 5, %s", n, v, ver5)
	}

	vol.publish(v1)
	srcWaitLoaded(t, sink, 6, ver1)
	if n := errs.count(); n != 2 {
		t.Errorf("OnError called %d times, want 2 (each bad document reported once)", n)
	}
}

func TestFileSourceMissingFileThenAppears(t *testing.T) {
	vol := &srcVolume{t: t, dir: t.TempDir()}
	sink, errs := &srcParseSink{}, &srcErrors{}
	log, logs := srcLogger(t)
	src := &source.File{Path: vol.path(), Sink: sink, Log: log, OnError: errs.record}
	srcRun(t, src.Run)
	srcEventually(t, "the absent log line", func() bool { return logs.count("absent from its volume") == 1 })
	if sink.clearCount() != 1 {
		t.Fatalf("a populated volume without the file must clear the sink once, cleared %d times", sink.clearCount())
	}

	// Other files in the directory change: each event re-reads the still missing file.
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(vol.dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		srcEventually(t, "the event for "+name, func() bool { return logs.count(filepath.Join(vol.dir, name)) > 0 })
	}

	v1, ver1 := srcDoc(t, 10)
	vol.publish(v1)
	srcWaitLoaded(t, sink, 1, ver1)
	if n := logs.count("absent from its volume"); n != 1 {
		t.Errorf("missing file logged %d times, want once", n)
	}
	if n := errs.count(); n != 0 {
		t.Errorf("OnError called %d times for a missing file (last: %v), want 0", n, errs.last())
	}

	// The ConfigMap deleted: the file goes from the volume, the sink is cleared; the same
	// document published again is loaded again.
	if err := os.Remove(vol.path()); err != nil {
		t.Fatal(err)
	}
	srcEventually(t, "the clear after the file went", func() bool { return sink.clearCount() == 2 })
	vol.publish(v1)
	srcWaitLoaded(t, sink, 2, ver1)
}

func TestFileSourceMissingDirectoryThenAppears(t *testing.T) {
	vol := &srcVolume{t: t, dir: filepath.Join(t.TempDir(), "not-yet")}
	sink := &srcParseSink{}
	log, logs := srcLogger(t)
	src := &source.File{Path: vol.path(), Sink: sink, Log: log, Poll: 20 * time.Millisecond}
	srcRun(t, src.Run)
	srcEventually(t, "the unwatched directory log line", func() bool { return logs.count("cannot watch") == 1 })

	if err := os.Mkdir(vol.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	v1, ver1 := srcDoc(t, 10)
	vol.publish(v1)
	srcWaitLoaded(t, sink, 1, ver1)

	// Later swaps are followed too.
	v2, ver2 := srcDoc(t, 20)
	vol.publish(v2)
	srcWaitLoaded(t, sink, 2, ver2)
}

func TestFileSourceOversizedAtStart(t *testing.T) {
	vol := &srcVolume{t: t, dir: t.TempDir()}
	vol.publish(bytes.Repeat([]byte{'x'}, snapshot.MaxBytes+1))
	sink, errs := &srcParseSink{}, &srcErrors{}
	src := &source.File{Path: vol.path(), Sink: sink, Log: logr.Discard(), OnError: errs.record}
	srcRun(t, src.Run)
	srcEventually(t, "OnError for the oversized snapshot", func() bool { return errs.count() == 1 })
	if n, _ := sink.state(); n != 0 {
		t.Fatalf("sink saw %d Load calls for an oversized file, want 0", n)
	}

	// Exactly MaxBytes is not oversized: it reaches the sink (and fails to parse there).
	vol.publish(bytes.Repeat([]byte{'x'}, snapshot.MaxBytes))
	srcEventually(t, "Load of a MaxBytes file", func() bool { n, _ := sink.state(); return n == 1 })
}

func TestFileSourceRequiresPathAndSink(t *testing.T) {
	ctx := context.Background()
	if err := (&source.File{Sink: &srcParseSink{}}).Run(ctx); err == nil {
		t.Error("Run without Path returned nil")
	}
	if err := (&source.File{Path: "/nonexistent/snapshot.json"}).Run(ctx); err == nil {
		t.Error("Run without Sink returned nil")
	}
}
