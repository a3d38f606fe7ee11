package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkSettle sets a request whose cost settles from its response (a check reserving 40,
// the reservation recorded, then settled at a cost of 0 to 80: an unreserve, a charge or no
// change) against a plain check, same run, same Redis, 64 callers over 10,000 identities,
// FixedWindow with two limits. redis-µs/op is the request's whole cost on the server (its
// three scripts).
func BenchmarkSettle(b *testing.B) {
	rdb := benchRedis(b)
	p := settlePolicy(b, FixedWindow, FailOpen, perHour("hour", 1_000_000_000), Limit{Name: "day", Requests: 10_000_000_000, Period: 24 * time.Hour})
	benchVersusCheck(b, rdb, p, "reserve+settle", func(l *Limiter, id string) error {
		at := time.Now()
		if d := l.Check(context.Background(), p, Request{Identity: id, Cost: 40}); d.WithoutRedis() || !d.Allowed {
			return fmt.Errorf("check: %+v", d)
		}
		r, err := l.Reserve(context.Background(), p, id, 40, time.Since(at))
		if err != nil {
			return err
		}
		_, err = l.Settle(context.Background(), p, Settlement{Identity: id, Reservation: r, Cost: rand.Int64N(81)})
		return err
	})
}

// BenchmarkSlots sets a request of a policy with a concurrency limit (an acquire taking a
// slot with the rate limits, then its release) against a plain check of the same limits,
// same run, same Redis, 64 callers over 10,000 identities, TokenBucket with two limits and
// 100 slots per identity. redis-µs/op is the request's whole cost on the server.
func BenchmarkSlots(b *testing.B) {
	rdb := benchRedis(b)
	limits := []Limit{perHour("hour", 1_000_000), {Name: "day", Requests: 10_000_000, Period: 24 * time.Hour}}
	plain := newPolicy(b, TokenBucket, FailOpen, limits...)
	slots := concurrentPolicy(b, TokenBucket, 100, time.Minute, limits...)
	benchVersusCheck(b, rdb, plain, "acquire+release", func(l *Limiter, id string) error {
		slot := NewID()
		if d := l.Check(context.Background(), slots, Request{Identity: id, Slot: slot}); d.WithoutRedis() || !d.Allowed {
			return fmt.Errorf("acquire: %+v", d)
		}
		_, err := l.Release(context.Background(), slots, id, slot)
		return err
	})
}
