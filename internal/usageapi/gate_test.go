package usageapi

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// clock is a settable time for a gate.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// admit requires user let in by g, returning the function that ends the overview.
func admit(t *testing.T, g *gate, user string) func() {
	t.Helper()
	done, refused := g.enter(user)
	if refused != nil {
		t.Fatalf("%s refused: %s (retry after %v)", user, refused.why, refused.retryAfter)
	}
	return done
}

// refuse requires user refused by g for a reason holding why, retrying after at least 1 s.
func refuse(t *testing.T, g *gate, user, why string) {
	t.Helper()
	done, refused := g.enter(user)
	if refused == nil {
		done()
		t.Fatalf("%s let in, want refused: %s", user, why)
	}
	if !strings.Contains(refused.why, why) || retryAfterSeconds(refused.retryAfter) < 1 {
		t.Fatalf("%s refused: %q, retry after %v; want %q and a Retry-After of at least 1 s", user, refused.why, refused.retryAfter, why)
	}
}

// TestGateOneInFlightPerReader: a reader's second overview while the first is under way is
// refused, and let in once it ended; another reader is not held up by it.
func TestGateOneInFlightPerReader(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	g := newGate(c.now)
	done := admit(t, g, "alice")
	refuse(t, g, "alice", "an overview of yours is under way")
	admit(t, g, "bob")()
	done()
	c.advance(time.Second) // the burst in all was spent
	admit(t, g, "alice")()
}

// TestGateInFlightInAll: beyond 2 overviews under way the next reader is refused, whoever.
func TestGateInFlightInAll(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	g := newGate(c.now)
	a, b := admit(t, g, "alice"), admit(t, g, "bob")
	refuse(t, g, "carol", "2 overviews are under way")
	a()
	c.advance(time.Second)
	admit(t, g, "carol")()
	b()
}

// TestGateRatePerReader: a reader starts 2 overviews at once (the burst), then one a
// second: the third at once is refused with a Retry-After of 1 s, and let in a second later.
// A refusal by the rate in all spends nothing of the reader's own.
func TestGateRatePerReader(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	g := newGate(c.now)
	admit(t, g, "alice")()
	admit(t, g, "alice")()
	if _, refused := g.enter("alice"); refused == nil || retryAfterSeconds(refused.retryAfter) != 1 || !strings.Contains(refused.why, "a second each") {
		t.Fatalf("alice's third at once: %+v; want refused, retry after 1 s", refused)
	}
	c.advance(time.Second)
	admit(t, g, "alice")()
	c.advance(time.Second)
	admit(t, g, "bob")()
	admit(t, g, "carol")() // the burst in all is spent
	refuse(t, g, "dave", "overviews a second in all")
	c.advance(500 * time.Millisecond)
	admit(t, g, "dave")() // dave's refusal cost him nothing, and half a second refilled one of 2/s
}

// TestGateRateInAllBoundsManyReaders: however many readers ask, over 10 seconds at most
// 2 + 2 x 10 overviews start: the arithmetic of gate.go's share of Redis.
func TestGateRateInAllBoundsManyReaders(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	g := newGate(c.now)
	started := 0
	for tick := range 100 { // every 100 ms for 10 s, 50 readers each
		for r := range 50 {
			if done, refused := g.enter(fmt.Sprintf("reader-%d", r)); refused == nil {
				started++
				done()
			}
		}
		if tick < 99 {
			c.advance(100 * time.Millisecond)
		}
	}
	if started > overviewBurst+overviewRate*10 {
		t.Fatalf("%d overviews started in 10 s by 50 readers; want at most %d", started, overviewBurst+overviewRate*10)
	}
	if started < overviewRate*10 {
		t.Fatalf("%d overviews started in 10 s; want the rate's %d", started, overviewRate*10)
	}
}

// TestGateForgetsIdleReaders: readers are remembered up to maxReaders; those idle with a
// full bucket again are forgotten to make room, and while every one is busy a new reader is
// refused rather than remembered.
func TestGateForgetsIdleReaders(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	g := newGate(c.now)
	for i := range maxReaders {
		g.readers[fmt.Sprintf("reader-%d", i)] = &reader{lim: newReaderLimiter(), busy: i == 0}
	}
	admit(t, g, "newcomer")()
	if len(g.readers) != 2 { // reader-0, busy, and the newcomer
		t.Fatalf("%d readers remembered after forgetting the idle ones, want 2", len(g.readers))
	}
	for i := range maxReaders {
		g.readers[fmt.Sprintf("busy-%d", i)] = &reader{lim: newReaderLimiter(), busy: true}
	}
	refuse(t, g, "one-too-many", "readers have overviews under way")
}
