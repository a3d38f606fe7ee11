package limiter

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAdjust sets an adjustment (a refund of 1, each under a new request id, so each
// runs the whole script and records its reply) against a check, same run, same Redis, one
// round trip each, 64 callers over 10,000 identities, FixedWindow with two limits.
// redis-µs/call is the script's own cost on the server (EVALSHA's usec_per_call over the
// run).
func BenchmarkAdjust(b *testing.B) {
	rdb := benchRedis(b)
	p := newPolicy(b, FixedWindow, FailOpen, perHour("hour", 1_000_000), Limit{Name: "day", Requests: 10_000_000, Period: 24 * time.Hour})
	var seq atomic.Int64
	benchVersusCheck(b, rdb, p, "refund", func(l *Limiter, id string) error {
		a := Adjustment{Op: OpRefund, Identity: id, Amount: 1, RequestID: fmt.Sprintf("bench-%d", seq.Add(1))}
		_, err := l.Adjust(context.Background(), p, a)
		return err
	})
}
