package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGCRAAdmitsExactlyAsTokenBucket is the proof issue 40 asks for before GCRA and
// TokenBucket share one body: on one fake clock, the same random traffic (costs from 1 to past
// the burst, clock steps within and across refills, peeks, grants, refunds, resets) and
// edits (the rate and the burst changed under keep-usage, as tiers and overrides do) go to a
// TokenBucket policy and a GCRA policy of the same limits. Every reply must be the same and
// every state value the same byte for byte, after every step.
func TestGCRAAdmitsExactlyAsTokenBucket(t *testing.T) {
	_, rdb := standalone(t)
	configs := [][]Limit{
		{{Name: "a", Requests: 5, Period: time.Second}},
		{{Name: "a", Requests: 10, Period: time.Second, Burst: 3}},
		{{Name: "a", Requests: 7, Period: 1300 * time.Millisecond}, {Name: "b", Requests: 40, Period: time.Minute, Burst: 12}},
		{{Name: "a", Requests: 3, Period: 2 * time.Second, Burst: 9}, {Name: "b", Requests: 25, Period: time.Minute}},
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 40))
			now := int64(1_800_000_000_000_000)
			clock := &fakeClockRunner{rdb: rdb}
			clock.setNow(t, now)
			pair := func(limits []Limit) [2]*Policy {
				var out [2]*Policy
				for i, alg := range []Algorithm{TokenBucket, GCRA} {
					p, err := NewPolicy(Spec{Namespace: "test", Name: fmt.Sprintf("equiv-%d-%d", seed, i), Algorithm: alg,
						Limits: limits, StateKey: testTemplate, TTL: 2 * time.Hour, FailureMode: FailOpen, KeepUsage: true})
					if err != nil {
						t.Fatal(err)
					}
					out[i] = p
				}
				return out
			}
			ps := pair(configs[0])
			kinds := map[string]int{} // the replies' kinds: admissions (one integer), tables, errors
			for step := range 600 {
				switch k := rng.IntN(20); {
				case k == 0: // an edit: the limits change, the keys stay (limit names a and b)
					ps = pair(configs[rng.IntN(len(configs))])
				case k < 3:
					now += rng.Int64N(5_000_000)
					clock.setNow(t, now)
				case k < 6:
					now += rng.Int64N(200_000)
					clock.setNow(t, now)
				}
				id := fmt.Sprint("caller-", rng.IntN(3))
				var replies [2]any
				op := rng.IntN(10)
				cost := int64(1 + rng.IntN(12))
				for i, p := range ps {
					replies[i] = equivStep(t, rdb, p, id, op, cost, step)
				}
				kinds[fmt.Sprintf("%T", replies[0])]++
				if !reflect.DeepEqual(replies[0], replies[1]) {
					t.Fatalf("step %d, op %d, cost %d, %s: TokenBucket replied %v, GCRA %v", step, op, cost, id, replies[0], replies[1])
				}
				for j := range ps[0].Limits {
					tb, errTB := rdb.Get(context.Background(), ps[0].Keys(id, "")[j]).Result()
					gc, errGC := rdb.Get(context.Background(), ps[1].Keys(id, "")[j]).Result()
					if tb != gc || (errTB == nil) != (errGC == nil) {
						t.Fatalf("step %d, op %d, %s, limit %d: TokenBucket's state %q (%v), GCRA's %q (%v)", step, op, id, j, tb, errTB, gc, errGC)
					}
				}
			}
			if kinds["int64"] < 50 || kinds["[]interface {}"] < 50 {
				t.Fatalf("replies by kind %v: want many admissions and many tables (denials, peeks, adjustments)", kinds)
			}
		})
	}
}

// equivStep runs one operation of TestGCRAAdmitsExactlyAsTokenBucket on p, on the fake
// clock: a check (ops 0-5), a peek (6), a grant (7), a refund (8) or a reset (9) of cost
// units, and returns the script's raw reply (or its error's text).
func equivStep(t *testing.T, rdb redis.UniversalClient, p *Policy, id string, op int, cost int64, step int) any {
	t.Helper()
	keys := p.Keys(id, "")
	var s *Script
	var args []any
	switch {
	case op < 6:
		s, args = p.script, p.Args(Request{Identity: id, Cost: cost})
	case op == 6:
		s, args = p.peekScript, p.peekArgs(cost, time.Time{})
	default:
		a := Adjustment{Op: []Op{OpGrant, OpRefund, OpReset}[op-7], Identity: id, Amount: cost,
			RequestID: fmt.Sprint("step-", step)}
		if a.Op == OpReset {
			a.Amount = 0
		}
		// The record key names the algorithm's policy: each of the pair records its own.
		s, keys, args = p.adjustScript, append(keys, adjustRecordKey(keys[0], a.RequestID)), p.adjustArgs(a, time.Minute, time.Time{})
	}
	v, err := rdb.Eval(context.Background(), withFakeClock(s), keys, args...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err.Error()
	}
	return v
}
