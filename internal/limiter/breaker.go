package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// breaker is a circuit breaker for the Redis connection: after threshold consecutive
// failures it opens, and checks go straight to the failure mode (well under a microsecond,
// not a timeout each). While open, a background probe (PING with its own, longer timeout)
// runs after cooldown, doubling the wait up to maxCooldown while it fails; its first success
// (any answer that does not count against the node, see ErrorKind) closes the breaker. No
// caller's request is spent probing, and a probe that must dial a new connection is not cut
// short by the per-check timeout.
type breaker struct {
	threshold    int32
	cooldown     time.Duration
	maxCooldown  time.Duration
	probeTimeout time.Duration
	probe        func(context.Context) error

	open      atomic.Bool
	failures  atomic.Int32
	nextProbe atomic.Int64 // unix nanos of the next probe while open

	stopOnce sync.Once
	stop     chan struct{}
}

func newBreaker(threshold int, cooldown, maxCooldown, probeTimeout time.Duration, probe func(context.Context) error) *breaker {
	return &breaker{threshold: int32(threshold), cooldown: cooldown, maxCooldown: maxCooldown, //nolint:gosec // small config value
		probeTimeout: probeTimeout, probe: probe, stop: make(chan struct{})}
}

// allow reports whether a call may go to Redis now.
func (b *breaker) allow() bool { return !b.open.Load() }

// success records a call that Redis answered.
func (b *breaker) success() {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
}

// failure records a call Redis did not answer; the threshold-th in a row opens the breaker.
func (b *breaker) failure(now time.Time) {
	if b.failures.Add(1) < b.threshold || !b.open.CompareAndSwap(false, true) {
		return
	}
	b.nextProbe.Store(now.Add(b.cooldown).UnixNano())
	go b.recover()
}

// recover probes Redis until it answers, then closes the breaker.
func (b *breaker) recover() {
	wait := b.cooldown
	for {
		t := time.NewTimer(wait)
		select {
		case <-b.stop:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.probeTimeout)
		err := b.probe(ctx)
		cancel()
		// Any answer but "I serve no one" (KindNode: no reply in time, LOADING, BUSY, ...) says
		// the node is back: a PING the ACL user may not send is answered NOPERM by a node
		// that is up, and waiting for a PONG would keep the breaker open for good.
		if err == nil || KindOf(err) != KindNode {
			b.failures.Store(0)
			b.open.Store(false)
			return
		}
		wait = min(2*wait, b.maxCooldown)
		b.nextProbe.Store(time.Now().Add(wait).UnixNano())
	}
}

// retryIn is how long until the next probe (0 when closed).
func (b *breaker) retryIn(now time.Time) time.Duration {
	if !b.open.Load() {
		return 0
	}
	return max(0, time.Duration(b.nextProbe.Load()-now.UnixNano()))
}

// close stops a running probe loop.
func (b *breaker) close() { b.stopOnce.Do(func() { close(b.stop) }) }
