package limiter

import (
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

// Algorithm is a counting algorithm; the names match the RateLimitPolicy API.
type Algorithm string

const (
	// TokenBucket refills requests/period continuously up to burst.
	TokenBucket Algorithm = "TokenBucket"
	// SlidingWindow weights the previous window's count by its remaining overlap.
	SlidingWindow Algorithm = "SlidingWindow"
	// FixedWindow counts requests in aligned windows of one period.
	FixedWindow Algorithm = "FixedWindow"
	// GCRA is the generic cell rate algorithm (virtual scheduling). It admits exactly what
	// TokenBucket admits (TestGCRAAdmitsExactlyAsTokenBucket), and runs the same scripts.
	GCRA Algorithm = "GCRA"
)

// algorithm is what differs between the algorithms, in one place.
type algorithm struct {
	// body is the scripts' body that decides its limits.
	body scripts.Body
	// bucket: a limit is T (µs per request) and a burst, and its state a time (TokenBucket,
	// GCRA). Such a limit refills continuously, is checked for whole-µs representability,
	// keeps usage across rates (keep-usage), and leases cells that must be spent before
	// they start. Otherwise a limit is requests per period, its state a count.
	bucket bool
	// calendar: its windows may be calendar days, weeks or months (FixedWindow).
	calendar bool
	// horizon is how long limit l's state can still matter after its last write.
	horizon func(l Limit, burst int64) time.Duration
}

// algorithmTable is every algorithm.
var algorithmTable = map[Algorithm]algorithm{
	TokenBucket:   {body: scripts.Bucket, bucket: true, horizon: refillTime},
	GCRA:          {body: scripts.Bucket, bucket: true, horizon: refillTime},
	FixedWindow:   {body: scripts.FixedWindow, calendar: true, horizon: func(l Limit, _ int64) time.Duration { return l.Period }},
	SlidingWindow: {body: scripts.SlidingWindow, horizon: func(l Limit, _ int64) time.Duration { return 2 * l.Period }},
}

// desc is a's entry of the table; an unknown algorithm's is the zero entry (NewPolicy refuses
// it first).
func (a Algorithm) desc() algorithm { return algorithmTable[a] }

// refillTime is a bucket's time to refill from empty: burst * T, at most maxVirtualTime.
func refillTime(l Limit, burst int64) time.Duration {
	return time.Duration(min(float64(burst)*float64(interval(l)), maxVirtualTime)) * time.Microsecond
}
