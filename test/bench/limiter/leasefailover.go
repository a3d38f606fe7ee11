package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/failover"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Issue 25, item 4: a primary whose replica lagged granted a lease, died, and the promoted
// replica handed the units out again. This file runs the scenario of
// internal/limiter/leasefailover_test.go without and with leases and reports both counts:
// leases must add nothing to what the failover loses.

// failoverRow is one algorithm's failover, without and with leases: how many checks were
// admitted in all.
type failoverRow struct {
	alg           limiter.Algorithm
	without, with int64
}

// excess is what leases added: with − without; above 0 a failover handed leased units out
// twice.
func (r failoverRow) excess() int64 { return r.with - r.without }

// measureFailovers runs every algorithm's failover without and then with leases.
func measureFailovers(ctx context.Context) ([]failoverRow, error) {
	var rows []failoverRow
	for _, a := range algorithms {
		r := failoverRow{alg: limiter.Algorithm(a.alg)}
		for _, leases := range []bool{false, true} {
			progress("failover with a lagging replica: %s, leases %v", r.alg, leases)
			n, err := failoverRun(ctx, r.alg, leases)
			if err != nil {
				return rows, fmt.Errorf("failover %s, leases %v: %w", r.alg, leases, err)
			}
			if leases {
				r.with = n
			} else {
				r.without = n
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// failoverRun runs failover's scenario: one identity (ScenarioLimit per hour) checked
// ScenarioLag times while the replica's link is held, a failover to the replica, and checks
// on through the same limiter, its client now dialling the promoted replica, until Redis
// denies. It returns how many were admitted in all.
func failoverRun(ctx context.Context, alg limiter.Algorithm, leases bool) (admitted int64, err error) {
	procs := redistest.NewProcs()
	defer func() { err = errors.Join(err, procs.Close()) }()
	var pair *failover.Pair
	if err := procs.Do(func(tb testing.TB) { pair, err = failover.Start(ctx, tb) }); err != nil {
		return 0, err
	}
	if err != nil {
		return 0, err
	}
	rdb := pair.Client()
	defer func() { _ = rdb.Close() }()
	l, err := limiter.New(rdb, limiter.Options{Timeout: time.Second, BreakerCooldown: 20 * time.Millisecond,
		Leases: limiter.LeaseOptions{HotRate: 1, Span: 5 * time.Second, MaxUnits: failover.ScenarioLease}})
	if err != nil {
		return 0, fmt.Errorf("limiter: %w", err)
	}
	defer l.Close()
	p, err := failoverPolicy(alg, leases)
	if err != nil {
		return 0, err
	}
	pair.Link.Hold()
	admitted = checkTimes(ctx, l, p, failover.ScenarioLag)
	if err := pair.Fail(ctx); err != nil {
		return admitted, err
	}
	n, err := checkUntilDenied(ctx, l, p)
	return admitted + n, err
}

// failoverPolicy is the failover runs' policy: FailClosed, ScenarioLimit per hour, leases on
// or off.
func failoverPolicy(alg limiter.Algorithm, leases bool) (*limiter.Policy, error) {
	p, err := newPolicy(alg, "bench", "failover", limiter.Limit{Name: "hour", Requests: failover.ScenarioLimit, Period: time.Hour}, 0, limiter.FailClosed)
	if err != nil {
		return nil, err
	}
	return withLeases(p, leases)
}

// checkTimes checks the identity n times and returns how many were admitted.
func checkTimes(ctx context.Context, l *limiter.Limiter, p *limiter.Policy, n int) int64 {
	var admitted int64
	for range n {
		if l.Check(ctx, p, limiter.Request{Identity: "hot"}).Allowed {
			admitted++
		}
	}
	return admitted
}

// checkUntilDenied checks the identity until Redis denies it (20 s at most) and returns how
// many were admitted meanwhile.
func checkUntilDenied(ctx context.Context, l *limiter.Limiter, p *limiter.Policy) (int64, error) {
	var admitted int64
	err := wait.Poll(20*time.Second, time.Millisecond, func() error {
		d := l.Check(ctx, p, limiter.Request{Identity: "hot"})
		switch {
		case d.Allowed:
			admitted++
		case d.Source == limiter.SourceRedis:
			return nil // the promoted replica's count is exhausted
		}
		return wait.ErrNotYet
	})
	if err != nil {
		return admitted, fmt.Errorf("no denial by the promoted replica (admitted %d): %w", admitted, err)
	}
	return admitted, nil
}
