package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/failover"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Issue 25, item 4: leases plus an ordinary failover admitted a whole lease twice. A
// primary whose replica lagged granted a lease of 25 units, died, and the replica was
// promoted without the debit: with a limit of 100, 125 were admitted with leases against
// 105 without (the five checks the dead primary alone had counted are lost either way).
// A lease is now spent only once every replica has acknowledged it, so leases add nothing
// to what a failover loses.

// TestLeasesAddNothingAFailoverLoses runs the failover of a primary with a lagging replica
// without and with leases, for every algorithm: the run with leases must admit no more than
// the run without.
func TestLeasesAddNothingAFailoverLoses(t *testing.T) {
	redistest.RequireRedis(t)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			without := failoverRun(t, alg, false)
			with := failoverRun(t, alg, true)
			t.Logf("%s: limit %d; admitted %d without leases, %d with leases", alg, failover.ScenarioLimit, without, with)
			if with > without {
				t.Fatalf("leases admitted %d, %d more than without leases (%d): a failover handed leased units out twice",
					with, with-without, without)
			}
		})
	}
}

// failoverRun runs failover's scenario: one identity of a limit of ScenarioLimit per hour on
// a primary with a replica, ScenarioLag checks while the replica's link is held (it receives
// nothing of the replication stream), then the primary is killed, the replica promoted, and
// the same limiter, its client now dialling the promoted replica, checks until Redis denies.
// It returns how many were admitted in all.
func failoverRun(t *testing.T, alg Algorithm, leases bool) int64 {
	t.Helper()
	ctx := context.Background()
	pair, err := failover.Start(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	rdb := pair.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	l := newLimiter(t, rdb, Options{Timeout: time.Second, BreakerCooldown: 20 * time.Millisecond,
		Leases: LeaseOptions{HotRate: 1, Span: 5 * time.Second, MaxUnits: failover.ScenarioLease}})
	p := newPolicy(t, alg, FailClosed, perHour("hour", failover.ScenarioLimit))
	if leases {
		p = leasePolicy(t, alg, perHour("hour", failover.ScenarioLimit))
	}
	pair.Link.Hold()
	admitted := int64(0)
	for range failover.ScenarioLag {
		if d := l.Check(ctx, p, Request{Identity: "hot"}); d.Allowed {
			admitted++
		}
	}
	if err := pair.Fail(ctx); err != nil {
		t.Fatal(err)
	}
	err = wait.Poll(20*time.Second, time.Millisecond, func() error {
		d := l.Check(ctx, p, Request{Identity: "hot"})
		switch {
		case d.Allowed:
			admitted++
		case d.Source == SourceRedis:
			return nil // the promoted replica's count is exhausted
		}
		return wait.ErrNotYet
	})
	if err != nil {
		t.Fatalf("no denial by the promoted replica: %v (admitted %d)", err, admitted)
	}
	return admitted
}
