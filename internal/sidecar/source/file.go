package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// DefaultPoll is how often a File source re-reads its file when Poll is not set.
const DefaultPoll = 10 * time.Second

// File feeds a snapshot file, typically the snapshot.json key of the snapshot ConfigMap
// mounted as a volume, into a Sink, and again whenever its content changes.
//
// The kubelet updates such a volume atomically: snapshot.json is a symlink to
// ..data/snapshot.json, and ..data a symlink to a timestamped directory that the kubelet
// replaces by renaming a new symlink over ..data. The file itself is never written, so
// File watches the directory holding Path, re-reads Path on any event in it, and hands
// the content to the sink only when its bytes changed. It also re-reads every Poll, in case
// an event was missed or the directory could not be watched yet.
//
// A missing file (volume not populated yet, optional ConfigMap absent) is waited for and
// logged once; the sink keeps whatever it holds. A file over snapshot.MaxBytes is refused
// without calling the sink. A document the sink refused is not offered again until its bytes
// change, so a bad file is reported once, not on every poll.
type File struct {
	// Path is the snapshot file, e.g. /etc/ratelimit/snapshot.json.
	Path string
	// Sink receives the documents.
	Sink Sink
	// Log receives progress and errors.
	Log logr.Logger
	// Poll is the fallback re-read period; zero or less means DefaultPoll.
	Poll time.Duration
	// OnError, when set, is called with every read, watch and load error (e.g. to count them).
	OnError func(error)
}

// fileRun is the state of one File.Run.
type fileRun struct {
	src     *File
	feed    *feeder
	watcher *fsnotify.Watcher
	dir     string
	origin  string
	waiting bool // the file is missing and that was logged
	blind   bool // the directory could not be watched and that was logged
}

// Run loads the file, then follows its changes until ctx is done, when it returns nil. It
// returns an error only when it cannot start (no Path or Sink, no inotify watcher) or the
// watcher stops unexpectedly.
func (s *File) Run(ctx context.Context) error {
	if s.Path == "" || s.Sink == nil {
		return errors.New("file snapshot source: Path and Sink are required")
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file snapshot source %s: create watcher: %w", s.Path, err)
	}
	defer func() { _ = w.Close() }()
	r := &fileRun{
		src:     s,
		feed:    &feeder{sink: s.Sink, log: s.Log, onError: s.OnError},
		watcher: w,
		dir:     filepath.Dir(s.Path),
		origin:  "file " + s.Path,
	}
	return r.loop(ctx, s.poll())
}

func (s *File) poll() time.Duration {
	if s.Poll <= 0 {
		return DefaultPoll
	}
	return s.Poll
}

// loop watches the directory and syncs on every event and tick, until ctx is done.
func (r *fileRun) loop(ctx context.Context, poll time.Duration) error {
	r.watch()
	r.sync()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-r.watcher.Events:
			if !ok {
				return fmt.Errorf("file snapshot source %s: watcher closed", r.src.Path)
			}
			r.src.Log.V(1).Info("snapshot directory changed", "event", ev.String())
			r.sync()
		case err, ok := <-r.watcher.Errors:
			if !ok {
				return fmt.Errorf("file snapshot source %s: watcher closed", r.src.Path)
			}
			r.feed.fail(fmt.Errorf("watch %s: %w", r.dir, err), "snapshot directory watch error", "dir", r.dir)
		case <-tick.C:
			r.watch()
			r.sync()
		}
	}
}

// watch adds the directory to the watcher unless it is watched already. The directory may
// not exist yet (or may have been removed, which drops the watch); the poll retries.
func (r *fileRun) watch() {
	if slices.Contains(r.watcher.WatchList(), r.dir) {
		return
	}
	if err := r.watcher.Add(r.dir); err != nil {
		if !r.blind {
			r.src.Log.Info("cannot watch the snapshot directory yet; polling", "dir", r.dir, "poll", r.src.poll().String(), "reason", err.Error())
			r.blind = true
		}
		return
	}
	r.blind = false
	r.src.Log.V(1).Info("watching snapshot directory", "dir", r.dir)
}

// sync reads the file and offers its content to the feeder.
func (r *fileRun) sync() {
	data, err := readSnapshotFile(r.src.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.missing()
		return
	case err != nil:
		r.feed.fail(err, "cannot read snapshot file", "origin", r.origin)
		return
	}
	r.waiting = false
	r.feed.offer(data, r.origin)
}

// missing handles an absent file. In a populated volume (the directory exists) it means the
// ConfigMap is absent, which the controller does when the namespace's last policy goes: no
// policy applies. Without the directory the volume is not there yet: wait.
func (r *fileRun) missing() {
	if r.waiting {
		return
	}
	r.waiting = true
	if _, err := os.Stat(r.dir); err == nil {
		r.src.Log.Info("snapshot file absent from its volume: no policy applies", "path", r.src.Path)
		r.feed.clear("file " + r.src.Path + " absent")
		return
	}
	r.src.Log.Info("snapshot file not there; waiting for it", "path", r.src.Path)
}

// readSnapshotFile reads at most snapshot.MaxBytes+1 bytes of path (following symlinks), so
// an oversized file shows as such without being read whole.
func readSnapshotFile(path string) ([]byte, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, fmt.Errorf("open snapshot file: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, snapshot.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot file %s: %w", path, err)
	}
	return data, nil
}
