package usageapi

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bounds on overviews, whatever their readers do. The verb they need is get, which the
// chart aggregates into edit, so many users may call them; each costs Redis at most
// budgetMicros by the model of budget.go (25 ms; 50 ms is the bound measured). On one
// replica serving the usage API:
//
//   - at most overviewRate overviews start per second (a burst of overviewBurst), whoever
//     asks: overviews take at most 2 x 25 ms = 50 ms of Redis's one thread per second, 5%
//     (10% at the 50 ms bound), in any second at most (2 + 2) x 25 ms = 100 ms;
//   - at most overviewsInFlight run at once, each with at most topWorkers calls in Redis at a
//     time: another tenant's command queues behind at most 2 SCAN steps (about 0.5 ms each)
//     or 8 peeks (about 30 µs each at worst);
//   - each reader (the authenticated user name) has at most one overview in flight and
//     starts at most readerRate a second (a burst of readerBurst), so one reader alone, or a
//     plugin following continuations (--all), leaves the other half of the rate to others.
//
// Beyond them the server answers 429 with Retry-After. Every replica has its own bounds: N
// replicas serving the usage API allow N times the share.
const (
	overviewsInFlight = 2
	overviewRate      = 2
	overviewBurst     = 2
	readerRate        = 1
	readerBurst       = 2
	// maxReaders bounds the readers remembered; readers whose bucket is full again and who
	// have nothing in flight are forgotten first.
	maxReaders = 4096
)

// gate admits overviews within the bounds above. Safe for concurrent use.
type gate struct {
	now func() time.Time

	mu       sync.Mutex
	inFlight int
	all      *rate.Limiter
	readers  map[string]*reader
}

// reader is one reader's rate and whether an overview of theirs is in flight.
type reader struct {
	lim  *rate.Limiter
	busy bool
}

// refusal is a gate's answer to an overview beyond its bounds: why, and when to try again.
type refusal struct {
	why        string
	retryAfter time.Duration
}

// newGate is a gate of the bounds above on clock now.
func newGate(now func() time.Time) *gate {
	return &gate{now: now, all: rate.NewLimiter(overviewRate, overviewBurst), readers: map[string]*reader{}}
}

// enter admits an overview of user, returning the function that ends it, or refuses it.
func (g *gate) enter(user string) (func(), *refusal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	r := g.readers[user]
	if r == nil {
		if len(g.readers) >= maxReaders {
			g.forgetIdle(now)
		}
		if len(g.readers) >= maxReaders {
			return nil, &refusal{why: fmt.Sprintf("%d readers have overviews under way", maxReaders), retryAfter: time.Second}
		}
		r = &reader{lim: newReaderLimiter()}
		g.readers[user] = r
	}
	switch {
	case r.busy:
		return nil, &refusal{why: "an overview of yours is under way: one at a time", retryAfter: time.Second}
	case g.inFlight >= overviewsInFlight:
		return nil, &refusal{why: fmt.Sprintf("%d overviews are under way, the most at once", overviewsInFlight), retryAfter: time.Second}
	}
	mine := r.lim.ReserveN(now, 1)
	if d := mine.DelayFrom(now); d > 0 {
		mine.CancelAt(now)
		return nil, &refusal{why: fmt.Sprintf("at most %d overview a second each (a burst of %d)", readerRate, readerBurst), retryAfter: d}
	}
	ours := g.all.ReserveN(now, 1)
	if d := ours.DelayFrom(now); d > 0 {
		ours.CancelAt(now)
		mine.CancelAt(now)
		return nil, &refusal{why: fmt.Sprintf("at most %d overviews a second in all", overviewRate), retryAfter: d}
	}
	r.busy = true
	g.inFlight++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		r.busy = false
		g.inFlight--
	}, nil
}

// newReaderLimiter is one reader's rate.
func newReaderLimiter() *rate.Limiter { return rate.NewLimiter(readerRate, readerBurst) }

// forgetIdle forgets the readers with nothing in flight whose bucket is full again: they
// would be let in as new readers are.
func (g *gate) forgetIdle(now time.Time) {
	for name, r := range g.readers {
		if !r.busy && r.lim.TokensAt(now) >= readerBurst {
			delete(g.readers, name)
		}
	}
}

// retryAfterSeconds is a Retry-After header's whole seconds for d, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}
