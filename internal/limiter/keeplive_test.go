package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The figures (Spec.KeepUsage) on the paths sidecars take, on the Redis clock:
// EVALSHA with and without pipelining, FCALL of the manager's function libraries, on a
// standalone server and on a 3-primary Cluster, for checks and for the lease scripts.

// keepTiers is the two tiers of one limit "daily" for alg, KeepUsage on, on keys of
// a policy named name (calling functions when functions).
func keepTiers(t *testing.T, alg Algorithm, name string, functions bool) (free, pro *Policy) {
	t.Helper()
	mk := func(requests int64) *Policy {
		p, err := NewPolicy(Spec{Namespace: "keep", Name: name, Algorithm: alg,
			Limits: []Limit{{Name: "daily", Requests: requests, Period: keepDay}}, StateKey: testTemplate,
			IdempotencyKey: testIdemTemplate, TTL: 2*keepDay + time.Hour, IdempotencyTTL: time.Hour,
			IdempotencyMaxReplays: 3, FailureMode: FailClosed, KeepUsage: true, Functions: functions})
		if err != nil {
			t.Fatalf("NewPolicy: %v", err)
		}
		return p
	}
	return mk(1_000), mk(100_000)
}

// keepFigures checks the figures through l and rdb for every algorithm: 900 used of
// free leave 99,100 of pro to a check and to a lease; 5,000 used of pro deny under free, to
// a check and to a lease. The windows' figures are exact whatever the clock does within the
// day; the buckets' too, as long as less than one of free's tokens (86.4 s) refills during
// the test.
func keepFigures(t *testing.T, l *Limiter, rdb redis.UniversalClient, tag string, functions bool) {
	t.Helper()
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			free, pro := keepTiers(t, alg, fmt.Sprintf("live-%s-%s-%d", tag, alg, time.Now().UnixNano()), functions)
			// Not across the end of a day's window (UTC midnight): wait for it if it is near.
			if now := time.Now(); now.Add(time.Minute).Truncate(keepDay) != now.Truncate(keepDay) {
				time.Sleep(time.Until(now.Add(time.Minute).Truncate(keepDay)) + time.Second)
			}
			liveUpgrade(t, l, rdb, free, pro)
			liveDowngrade(t, l, rdb, free, pro)
		})
	}
}

// liveUpgrade: 900 used under free leave 99,099 of pro after one more request, to a check,
// then to a lease of everything.
func liveUpgrade(t *testing.T, l *Limiter, rdb redis.UniversalClient, free, pro *Policy) {
	t.Helper()
	for range 9 {
		if d := mustCheck(t, l, free, Request{Identity: "upgrader", Cost: 100}); !d.Allowed {
			t.Fatalf("spending 900 under free: %+v", d)
		}
	}
	if d := mustCheck(t, l, pro, Request{Identity: "upgrader"}); !d.Allowed || d.Remaining != 99_099 {
		t.Fatalf("900 used of 1,000/day, then a request under 100,000/day: %+v; want admitted, 99,099 left", d)
	}
	if r := liveLease(t, rdb, pro, "upgrader", 1_000_000); r.granted != 99_099 || r.left != 0 {
		t.Fatalf("a lease of everything under pro after 901 used: %+v; want 99,099 granted", r)
	}
}

// liveDowngrade: 5,000 used under pro deny under free, to a check and to a lease.
func liveDowngrade(t *testing.T, l *Limiter, rdb redis.UniversalClient, free, pro *Policy) {
	t.Helper()
	for range 5 {
		if d := mustCheck(t, l, pro, Request{Identity: "downgrader", Cost: 1_000}); !d.Allowed {
			t.Fatalf("spending 5,000 under pro: %+v", d)
		}
	}
	if d := mustCheck(t, l, free, Request{Identity: "downgrader"}); d.Allowed || d.Remaining != 0 {
		t.Fatalf("5,000 used of 100,000/day, then a request under 1,000/day: %+v; want denied, 0 left", d)
	}
	if r := liveLease(t, rdb, free, "downgrader", 10); r.granted != 0 || r.left != 0 {
		t.Fatalf("a lease under free after 5,000 used under pro: %+v; want nothing granted, 0 left", r)
	}
}

// liveLease takes a lease "l1" of up to want units of identity under p.
func liveLease(t *testing.T, rdb redis.UniversalClient, p *Policy, identity string, want int64) leaseReplyOf {
	t.Helper()
	v, err := evalOne(context.Background(), rdb, p.leaseScript, leaseKeys(p.Keys(identity, ""), "l1", nil), p.leaseArgs(want, 1, nil, time.Now()))
	if err != nil {
		t.Fatalf("lease under %s: %v", p.Name, err)
	}
	return leaseReplyFrom(t, v)
}

// TestTierChangeKeepsUsageOnEveryPath: the figures with EVALSHA (with and without
// pipelining) and FCALL on a standalone server.
func TestTierChangeKeepsUsageOnEveryPath(t *testing.T) {
	_, rdb := standalone(t)
	loadLibraries(t, rdb)
	for _, pipelining := range []bool{false, true} {
		t.Run(fmt.Sprintf("evalsha/pipelining=%v", pipelining), func(t *testing.T) {
			keepFigures(t, newLimiter(t, rdb, Options{Pipelining: pipelining}), rdb, fmt.Sprintf("sha%v", pipelining), false)
		})
	}
	t.Run("fcall", func(t *testing.T) {
		keepFigures(t, newLimiter(t, rdb, Options{}), rdb, "fcall", true)
	})
}

// TestTierChangeKeepsUsageOnCluster: the figures on a 3-primary Cluster, with EVALSHA and
// with FCALL (the libraries loaded on every primary, as the manager does).
func TestTierChangeKeepsUsageOnCluster(t *testing.T) {
	cluster := startClusterT(t)
	for _, n := range cluster.Primaries() {
		loadLibraries(t, n.Client())
	}
	cc := cluster.Client()
	t.Run("evalsha", func(t *testing.T) {
		keepFigures(t, newLimiter(t, cc, Options{Pipelining: true, Timeout: 5 * time.Second}), cc, "csha", false)
	})
	t.Run("fcall", func(t *testing.T) {
		keepFigures(t, newLimiter(t, cc, Options{Timeout: 5 * time.Second}), cc, "cfcall", true)
	})
}
