package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker is a circuit breaker for the Redis connection: after threshold consecutive
// failures it opens, and checks go straight to the failure mode (microseconds, not a
// timeout each) until cooldown passes; then one probe is let through. A failed probe
// doubles the cooldown up to maxCooldown; a success closes the breaker.
type breaker struct {
	threshold   int
	cooldown    time.Duration
	maxCooldown time.Duration

	open     atomic.Bool  // fast path: closed breakers take no lock
	failures atomic.Int32 // consecutive failures; written under mu

	mu      sync.Mutex
	until   time.Time     // open until this time
	wait    time.Duration // current cooldown
	probing bool          // a half-open probe is in flight
}

func newBreaker(threshold int, cooldown, maxCooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, maxCooldown: maxCooldown, wait: cooldown}
}

// allow reports whether a call may go to Redis now.
func (b *breaker) allow(now time.Time) bool {
	if !b.open.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.probing || now.Before(b.until) {
		return false
	}
	b.probing = true
	return true
}

// success records a call that Redis answered.
func (b *breaker) success() {
	if !b.open.Load() && b.failures.Load() == 0 {
		return
	}
	b.mu.Lock()
	b.failures.Store(0)
	b.probing, b.wait = false, b.cooldown
	b.open.Store(false)
	b.mu.Unlock()
}

// abandon records a call that ended without telling whether Redis is up (its caller went
// away): a half-open probe is released so the next call probes instead.
func (b *breaker) abandon() {
	if !b.open.Load() {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// failure records a call Redis did not answer.
func (b *breaker) failure(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.failures.Add(1)
	switch {
	case b.probing:
		b.probing = false
		b.wait = min(2*b.wait, b.maxCooldown)
		b.until = now.Add(b.wait)
	case !b.open.Load() && int(n) >= b.threshold:
		b.until = now.Add(b.wait)
		b.open.Store(true)
	}
}

// retryIn is how long until the breaker lets a probe through (0 when closed).
func (b *breaker) retryIn(now time.Time) time.Duration {
	if !b.open.Load() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, b.until.Sub(now))
}
