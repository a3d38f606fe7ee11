// Package source feeds snapshot documents into the sidecar's engine (an engine.Store, or any
// Sink): File follows a mounted snapshot ConfigMap volume, ConfigMap watches the ConfigMap
// through the API server. Both hand a document over only when its bytes changed, refuse one
// over snapshot.MaxBytes without handing it over, and tell a Clearer when the namespace has
// no snapshot at all.
package source

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Sink receives snapshot documents. Load parses and installs data; on error the sink keeps its
// last good snapshot (the source only logs and counts). origin says where data came from (for logs).
type Sink interface {
	Load(data []byte, origin string) error
}

// Clearer is a Sink that can be told the namespace has no snapshot at all: the ConfigMap is
// absent (never created, or deleted with the namespace's last policy), so no policy applies.
type Clearer interface {
	Clear(origin string)
}

// feeder is what both sources share: it hands a document to the sink only when its bytes
// differ from the last ones offered, refuses oversized documents without calling the sink,
// and logs and reports every failure. It is safe for concurrent use.
type feeder struct {
	sink    Sink
	log     logr.Logger
	onError func(error)

	mu      sync.Mutex
	last    [sha256.Size]byte
	offered bool
}

// offer hands data to the sink unless it is the document offered last time. A refused
// document counts as offered too, so the same bad bytes are reported once, not on every
// event or poll; the next different bytes are offered again.
func (f *feeder) offer(data []byte, origin string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sum := sha256.Sum256(data)
	if f.offered && sum == f.last {
		f.log.V(1).Info("snapshot unchanged", "origin", origin)
		return
	}
	f.last, f.offered = sum, true
	if len(data) > snapshot.MaxBytes {
		f.fail(fmt.Errorf("snapshot from %s exceeds %d bytes: refused", origin, snapshot.MaxBytes),
			"refused oversized snapshot; keeping the last good one", "origin", origin)
		return
	}
	if err := f.sink.Load(data, origin); err != nil {
		f.fail(fmt.Errorf("load snapshot from %s: %w", origin, err),
			"refused snapshot; keeping the last good one", "origin", origin)
		return
	}
	f.log.Info("loaded snapshot", "origin", origin, "bytes", len(data))
}

// clear tells the sink there is no snapshot, when it understands that, and forgets the last
// document so the same bytes published again are loaded again.
func (f *feeder) clear(origin string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offered = false
	if c, ok := f.sink.(Clearer); ok {
		c.Clear(origin)
	}
}

// fail logs err with msg and the key/value pairs, and reports it to onError when set.
func (f *feeder) fail(err error, msg string, keysAndValues ...any) {
	f.log.Error(err, msg, keysAndValues...)
	if f.onError != nil {
		f.onError(err)
	}
}
