package limiter

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Per-identity structures must be bounded by entries times a constant, whatever the callers
// send: the deny cache and LocalCap once kept the raw identity, so 100 KiB identities times
// the default 10,000 entries held about 1 GB. These tests fill each structure to its bound
// with distinct 64 KiB identities and measure the live heap they keep.

const (
	memEntries     = 2000
	memIdentityLen = 64 << 10
	// memPerEntry is the most one entry may keep: the encoded identity (at most 128 bytes),
	// the LRU's node and the entry itself.
	memPerEntry = 1024
)

// hugeIdentity is a distinct identity of memIdentityLen bytes, allocated on its own.
func hugeIdentity(i int) string {
	return fmt.Sprintf("%08d", i) + strings.Repeat("x", memIdentityLen-8)
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// checkRetained fails when fill keeps more than memPerEntry bytes per entry alive.
func checkRetained(t *testing.T, what string, fill func(identity string)) {
	t.Helper()
	before := liveHeap()
	for i := range memEntries {
		fill(hugeIdentity(i))
	}
	after := liveHeap()
	kept := int64(after) - int64(before)
	t.Logf("%s: %d entries of %d-byte identities keep %d bytes (%d per entry)", what, memEntries, memIdentityLen, kept, kept/memEntries)
	if kept > memEntries*memPerEntry {
		t.Fatalf("%s keeps %d bytes for %d entries: more than %d per entry; identities are kept raw", what, kept, memEntries, memPerEntry)
	}
}

func TestDenyCacheMemoryBoundedByEntries(t *testing.T) {
	c, err := newDenyCache(memEntries, time.Hour, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	p := newPolicy(t, GCRA, FailOpen, perHour("hourly", 1))
	now := time.Now()
	checkRetained(t, "deny cache", func(id string) {
		c.put(p, id, 1, Decision{RetryAfter: time.Minute, DeniedBy: "hourly"}, now)
	})
	if _, ok := c.get(p, hugeIdentity(memEntries-1), 1, now); !ok {
		t.Fatal("the last denial is not cached: the test measured nothing")
	}
	if _, ok := c.get(p, hugeIdentity(memEntries - 1)[:memIdentityLen-1]+"y", 1, now); ok {
		t.Fatal("another identity of the same length shares the entry")
	}
}

func TestLocalCapMemoryBoundedByEntries(t *testing.T) {
	p := newPolicy(t, GCRA, LocalCap, perHour("hourly", 1))
	clock := func() time.Time { return time.Unix(1e9, 0) }
	checkRetained(t, "local cap", func(id string) { p.local.take(id, 1, clock) })
	if ok, _, _ := p.local.take(hugeIdentity(memEntries-1), 3, clock); ok {
		t.Fatal("the last identity's window is not kept: the test measured nothing")
	}
}
