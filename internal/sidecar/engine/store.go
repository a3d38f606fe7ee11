package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Store holds the snapshot in force. Load installs a new one only if it parses and matches
// the expected namespace; otherwise the last good one stays. A policy of it that does not
// compile is refused alone, and its last good version stays in force. Readers never block:
// Current is one atomic load, and a request keeps the Set it started with.
type Store struct {
	// Namespace, when set, is the only namespace whose snapshot is accepted.
	Namespace string
	// Log receives one line per load or refusal.
	Log logr.Logger
	// Metrics, when set, counts loads and refusals.
	Metrics *Metrics

	mu  sync.Mutex // serialises Load
	cur atomic.Pointer[Set]
}

// Current is the snapshot in force, or nil before the first good load.
func (s *Store) Current() *Set { return s.cur.Load() }

// Load parses data and installs it. On error nothing changes; the error says why. The
// snapshot sources refuse a document over snapshot.MaxBytes before it reaches Load.
func (s *Store) Load(data []byte, origin string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, refused, err := s.build(data)
	if err != nil {
		s.Log.Error(err, "snapshot refused; keeping the last good one", "origin", origin, "version", s.version())
		s.Metrics.snapshotRefused()
		return err
	}
	for _, err := range refused {
		s.Log.Error(err, "snapshot policy refused; its last good version, if any, stays in force",
			"origin", origin, "version", set.Version)
	}
	prev := s.cur.Swap(set)
	if prev == nil || prev.Version != set.Version {
		s.Log.Info("snapshot loaded", "origin", origin, "namespace", set.Namespace,
			"version", set.Version, "policies", len(set.Rules))
	}
	s.Metrics.snapshotLoaded(set)
	return nil
}

// Clear installs an empty snapshot: the namespace has no snapshot ConfigMap, so no policy
// applies and every request passes unchecked.
func (s *Store) Clear(origin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := emptySet(s.Namespace)
	if prev := s.cur.Swap(set); prev == nil || len(prev.Rules) > 0 {
		s.Log.Info("no snapshot: no policy applies", "origin", origin)
	}
	s.Metrics.snapshotLoaded(set)
}

func (s *Store) build(data []byte) (*Set, []error, error) {
	parsed, err := snapshot.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("parse snapshot: %w", err)
	}
	if s.Namespace != "" && parsed.Namespace != s.Namespace {
		return nil, nil, fmt.Errorf("snapshot is for namespace %q, this sidecar serves %q", parsed.Namespace, s.Namespace)
	}
	set, refused := newSet(parsed, s.cur.Load())
	return set, refused, nil
}

func (s *Store) version() string {
	if c := s.cur.Load(); c != nil {
		return c.Version
	}
	return ""
}
