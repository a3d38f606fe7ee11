package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Issue 25, item 5: a check read the clock once at its start and spent from the lease after
// waiting for the lease's lock: 50 callers held 150 ms across a window's end were all
// admitted from the old window's lease, and Redis then admitted the full limit in the new
// window (450 against 400). A lease spend is now judged by the clock read under the lock.

// countingClock is a clock the test moves, counting how often it is read.
type countingClock struct {
	mu    sync.Mutex
	now   time.Time
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *countingClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestLeaseIsNotSpentPastItsWindowAfterWaitingForTheLock holds an identity's lease lock
// while 50 checks arrive (each has read the clock), moves the clock past the end of the
// lease's window, then lets them through: none may spend the old window's lease.
func TestLeaseIsNotSpentPastItsWindowAfterWaitingForTheLock(t *testing.T) {
	const callers = 50
	_, rdb := standalone(t)
	clock := &countingClock{now: time.Now()}
	l := newLimiter(t, rdb, Options{Now: clock.Now, Leases: LeaseOptions{HotRate: 1, Span: time.Minute}})
	p := leasePolicy(t, FixedWindow, perHour("hour", 1000))
	ctx := context.Background()
	for range 20 { // hot, with a lease of far more than callers units
		if d := l.Check(ctx, p, Request{Identity: "hot"}); !d.Allowed {
			t.Fatalf("warm-up check denied: %+v", d)
		}
	}
	e := l.leases.entry(p, "hot")
	e.mu.Lock()
	old := e.cur
	if old == nil || old.units-old.next < callers {
		e.mu.Unlock()
		t.Fatalf("lease %+v: want one with at least %d units left", old, callers)
	}
	spent := old.next
	reads := clock.reads.Load()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { l.Check(ctx, p, Request{Identity: "hot"}) })
	}
	wait.Until(t, 10*time.Second, "every caller read the clock", func() bool { return clock.reads.Load() >= reads+callers })
	clock.advance(old.deadline(old.next).Sub(clock.Now()) + time.Second) // past the lease's window
	e.mu.Unlock()
	wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if old.next != spent {
		t.Fatalf("%d checks spent the lease of a window that had ended while they waited for its lock", old.next-spent)
	}
}

// The rest of the class: LocalCap, the in-process failure mode, read the clock before taking
// the identity's window lock, so callers that waited for it across the window's end counted
// in the old window, and the new window then admitted its whole cap besides. It reads the
// clock under the lock now.
func TestLocalCapIsNotSpentPastItsWindowAfterWaitingForTheLock(t *testing.T) {
	const limit, callers = 100, 50
	clock := &countingClock{now: time.Now()}
	c, err := newLocalCap(Spec{FailureMode: LocalCap, LocalCap: &LocalCapConfig{Requests: limit, Period: time.Second, MaxIdentities: 10}})
	if err != nil {
		t.Fatal(err)
	}
	admitted := func(n int) int64 {
		var got atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if ok, _, _ := c.take("caller", 1, clock.Now); ok {
					got.Add(1)
				}
			})
		}
		wg.Wait()
		return got.Load()
	}
	admitted(limit / 2) // half of the first window
	w, _ := c.windows.Get(keylayout.EncodeValue("caller"))
	w.mu.Lock()
	reads := clock.reads.Load()
	stalled := make(chan int64)
	go func() { stalled <- admitted(callers) }()
	// Let the callers reach the window's lock (those that read the clock first have).
	_ = wait.Poll(200*time.Millisecond, time.Millisecond, wait.Cond(func() bool { return clock.reads.Load() >= reads+callers }))
	clock.advance(2 * time.Second) // the first window has ended
	w.mu.Unlock()
	inNewWindow := <-stalled + admitted(2*limit)
	if inNewWindow > limit {
		t.Fatalf("%d admitted in the second window, cap %d: callers that waited across its start spent the first window's room", inNewWindow, limit)
	}
}
