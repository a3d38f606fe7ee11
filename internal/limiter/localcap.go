package limiter

import (
	"errors"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// localCap is the in-process fallback of a LocalCap policy: a fixed window per identity,
// at most MaxIdentities of them (least recently used forgotten), each keyed by the identity
// encoded as in Redis keys (at most keylayout.MaxEncodedLen bytes), so memory stays bounded
// by entries times a constant however many callers, and however long their identities.
type localCap struct {
	requests int64
	period   time.Duration
	windows  *lru.Cache[string, *localWindow]
}

type localWindow struct {
	mu    sync.Mutex
	start time.Time
	count int64
}

func newLocalCap(c Spec) (*localCap, error) {
	if c.FailureMode != LocalCap {
		return nil, nil
	}
	if err := checkLocalCap(c); err != nil {
		return nil, err
	}
	lc := c.LocalCap
	cache, err := lru.New[string, *localWindow](lc.MaxIdentities)
	if err != nil {
		return nil, err
	}
	return &localCap{requests: lc.Requests, period: lc.Period, windows: cache}, nil
}

// checkLocalCap says what is wrong with c's local cap, when its failure mode is LocalCap.
func checkLocalCap(c Spec) error {
	if c.FailureMode != LocalCap {
		return nil
	}
	if lc := c.LocalCap; lc == nil || lc.Requests < 1 || lc.Period < time.Millisecond || lc.MaxIdentities < 1 {
		return errors.New("failureMode LocalCap needs localCap with requests >= 1, period >= 1ms and maxIdentities >= 1")
	}
	return nil
}

// take debits cost for identity and reports whether it fits, with the wait when it does not.
// The clock is read once the identity's window is locked: a caller that waited for the lock
// across the window's end must count in the new window, not spend the old one's room.
func (c *localCap) take(identity string, cost int64, clock func() time.Time) (bool, int64, time.Duration) {
	identity = keylayout.EncodeValue(identity)
	w, ok := c.windows.Get(identity)
	if !ok {
		w = &localWindow{}
		if prev, found, _ := c.windows.PeekOrAdd(identity, w); found {
			w = prev
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := clock()
	if c.ended(w, now) {
		w.start, w.count = now, 0
	}
	ok, rem, wait := c.answer(w.count, w.start, cost, now)
	if ok {
		w.count += cost
		rem -= cost
	}
	return ok, rem, wait
}

// ended reports whether w's window is over (or never began) at now.
func (c *localCap) ended(w *localWindow, now time.Time) bool {
	return w.start.IsZero() || now.Sub(w.start) >= c.period
}

// answer is whether cost fits a window begun at start holding count, what it holds before
// the request, and the wait to its end when cost does not fit.
func (c *localCap) answer(count int64, start time.Time, cost int64, now time.Time) (bool, int64, time.Duration) {
	if count+cost > c.requests {
		return false, c.requests - count, c.period - now.Sub(start)
	}
	return true, c.requests - count, 0
}

// peek is take without taking: what take would answer for cost now, counting nothing (and
// remembering no identity it has not seen).
func (c *localCap) peek(identity string, cost int64, clock func() time.Time) (bool, int64, time.Duration) {
	now := clock()
	count, start := int64(0), now
	if w, ok := c.windows.Peek(keylayout.EncodeValue(identity)); ok {
		w.mu.Lock()
		if !c.ended(w, now) {
			count, start = w.count, w.start
		}
		w.mu.Unlock()
	}
	return c.answer(count, start, cost, now)
}
