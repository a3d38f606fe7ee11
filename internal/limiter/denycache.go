package limiter

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// denyCache remembers denials that Redis said are certain until a known time, so a caller
// hammering a limit it already exhausted is answered in-process instead of costing a round
// trip. A denial for cost c also covers any larger cost; a smaller cost asks Redis again.
// Bounded: the least recently used entries are dropped, and each entry holds the identity
// encoded as in Redis keys (at most keylayout.MaxEncodedLen bytes), never the raw value, so
// memory is bounded by entries times a constant whatever callers send.
//
// A denial is answered locally until its retry-after or for hold, whichever is shorter, so
// a change made in Redis (a reset or grant, Limiter.Adjust) is seen within hold; the answer
// keeps the retry-after Redis gave. When an entry expires, one caller is let through to Redis
// and the others keep getting the denial for up to grace (the Redis timeout), so a hot
// identity's expiry costs one round trip, not one per concurrent caller. An admission
// forgets the entry at once.
type denyCache struct {
	entries     *lru.Cache[denyKey, denyEntry]
	hold, grace time.Duration
}

type denyKey struct {
	policy *Policy
	// identity is keylayout.EncodeValue of the identity: injective and bounded.
	identity string
}

func newDenyKey(p *Policy, identity string) denyKey {
	return denyKey{p, keylayout.EncodeValue(identity)}
}

type denyEntry struct {
	// until is when the entry stops answering; at is when Redis decided.
	until, at time.Time
	cost      int64
	decision  Decision
}

func newDenyCache(size int, hold, grace time.Duration) (*denyCache, error) {
	c, err := lru.New[denyKey, denyEntry](size)
	if err != nil {
		return nil, err
	}
	return &denyCache{entries: c, hold: hold, grace: grace}, nil
}

// get returns a cached denial still in force for this check.
func (c *denyCache) get(p *Policy, identity string, cost int64, now time.Time) (Decision, bool) {
	k := newDenyKey(p, identity)
	e, ok := c.entries.Get(k)
	if !ok {
		return Decision{}, false
	}
	if !now.Before(e.until) {
		// This caller asks Redis; the others keep the denial while it does.
		e.until = now.Add(c.grace)
		c.entries.Add(k, e)
		return Decision{}, false
	}
	if cost < e.cost {
		return Decision{}, false
	}
	d := e.decision
	elapsed := now.Sub(e.at)
	d.Source = SourceDenyCache
	d.RetryAfter = max(d.RetryAfter-elapsed, e.until.Sub(now))
	d.ResetAfter = max(0, d.ResetAfter-elapsed)
	return d, true
}

// put remembers a denial from Redis whose retry-after is known, and forgets the identity's
// entry on an admission.
func (c *denyCache) put(p *Policy, identity string, cost int64, d Decision, now time.Time) {
	if d.Allowed {
		c.entries.Remove(newDenyKey(p, identity))
		return
	}
	if d.RetryAfter <= 0 {
		return
	}
	// A denial is never answered locally for longer than the policy's horizon, whatever the
	// reply said: the scripts keep their replies within it, and this keeps a reply that is
	// not (older scripts during an upgrade) from locking a caller out for longer.
	d.RetryAfter = min(d.RetryAfter, p.horizon)
	c.entries.Add(newDenyKey(p, identity), denyEntry{until: now.Add(min(d.RetryAfter, c.hold)), at: now, cost: cost, decision: d})
}
