package limiter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// shardedPolicy is a policy of one limit spread over n shards, with leases or not.
func shardedPolicy(t testing.TB, alg Algorithm, n int, leases bool, l Limit) *Policy {
	t.Helper()
	c := newPolicy(t, alg, FailClosed, l).Spec
	c.Shards, c.Leases = n, leases
	p, err := NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

// TestShardedGlobalLimitExact spreads one Fixed identity's budget of 300 over 3 shards on
// the 3-primary Cluster and hammers it from 32 callers with 2L checks, for every algorithm
// (nothing refills: 300 per 1000 h): exactly L admitted, every primary ran script calls
// (each shard on its own primary), and every call touched one hash tag (the Cluster would
// refuse CROSSSLOT otherwise: no decision without Redis).
func TestShardedGlobalLimitExact(t *testing.T) {
	cl := startClusterT(t)
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	l := newLimiter(t, rdb, Options{Pipelining: true})
	for _, alg := range algorithms {
		for _, leases := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/leases=%v", alg, leases), func(t *testing.T) {
				exactOverShards(t, cl, l, shardedPolicy(t, alg, 3, leases, Limit{Name: "global", Requests: 300, Period: 1000 * time.Hour}))
			})
		}
	}
}

// exactOverShards hammers p (a limit of 300 over 3 shards) from 32 callers with 600 checks:
// never more than 300 admitted, exactly 300 without leases (with leases, units a lease
// still holds at the end may be missing: at most a tenth here), and every primary ran
// script calls.
func exactOverShards(t *testing.T, cl *redistest.Cluster, l *Limiter, p *Policy) {
	t.Helper()
	const limit, callers = 300, 32
	before := perPrimaryCalls(t, cl.Primaries())
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range 2 * limit / callers {
				d := l.Check(context.Background(), p, Request{Identity: "all"})
				if d.WithoutRedis() {
					t.Errorf("decided without Redis: %v", d.Err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	calls := diff(perPrimaryCalls(t, cl.Primaries()), before)
	got := admitted.Load()
	t.Logf("admitted %d of %d; script calls per primary %v", got, limit, calls)
	if got > limit || !p.Leases && got != limit || got < limit*9/10 {
		t.Errorf("admitted %d, want %d (with leases at least %d)", got, limit, limit*9/10)
	}
	for i, n := range calls {
		if n < 10 {
			t.Errorf("primary %d ran %d script calls: the shards do not spread over the primaries", i, n)
		}
	}
}

// TestShardedDeniesOnlyWhenAllSpent: one caller, one check at a time, against 3 shards of
// 10: the first 10 checks are admitted whatever shard each starts at (an empty shard sends
// the check to the next), the 11th is denied.
func TestShardedDeniesOnlyWhenAllSpent(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			p := shardedPolicy(t, alg, 3, false, Limit{Name: "global", Requests: 10, Period: 1000 * time.Hour})
			for i := range 10 {
				if d := mustCheck(t, l, p, Request{Identity: "all"}); !d.Allowed {
					t.Fatalf("check %d denied with %d of 10 spent: a false denial", i+1, i)
				}
			}
			d := mustCheck(t, l, p, Request{Identity: "all"})
			if d.Allowed {
				t.Fatal("the 11th check of a budget of 10 was admitted")
			}
			if d.Limit != 10 {
				t.Errorf("denial reports limit %d, want the whole 10, not a shard's share", d.Limit)
			}
		})
	}
}

// TestShardShares: the shares add up to the limit exactly, and a limit smaller than the
// shard count is refused.
func TestShardShares(t *testing.T) {
	var sum int64
	for i := range 3 {
		sum += shareOf(FixedWindow, Limit{Requests: 10}, 3, i).Requests
	}
	if sum != 10 {
		t.Errorf("shares of 10 over 3 add up to %d", sum)
	}
	c := newPolicy(t, FixedWindow, FailClosed, Limit{Name: "g", Requests: 2, Period: time.Hour}).Spec
	c.Shards = 3
	if _, err := NewPolicy(c); err == nil {
		t.Error("3 shards of a limit of 2 accepted")
	}
}

// perPrimaryCalls is EVALSHA + EVAL calls so far on each primary.
func perPrimaryCalls(t testing.TB, primaries []*redistest.Server) []int64 {
	t.Helper()
	out := make([]int64, len(primaries))
	for i, s := range primaries {
		c := s.Client()
		out[i] = scriptCalls(t, c)
		_ = c.Close()
	}
	return out
}

func diff(after, before []int64) []int64 {
	out := make([]int64, len(after))
	for i := range after {
		out[i] = after[i] - before[i]
	}
	return out
}
