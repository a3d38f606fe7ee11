package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/failover"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// Issue 25, item 4 asks what the acknowledgement of leases costs: a lease call now travels
// with ROLE before it and WAIT for every replica after it. This file measures the hot-key
// section's TokenBucket job with leases on against a primary with one replica on a healthy
// link and against a primary without replicas (WAIT 0, answered at once).

// ackRow is the hot identity, leases on, on one primary: its runs.
type ackRow struct {
	name     string
	replicas int
	srv      *redistest.Server
	rdb      *redis.Client
	runs     []hotRun
}

// ackAlgorithm is the algorithm of the acknowledgement runs.
const ackAlgorithm = limiter.TokenBucket

// measureAcks starts a primary without replicas and one with a replica (direct loopback
// link) on procs, and runs the hot identity with leases on against each, c.reps runs each,
// the order swapped every repetition. The first row is the baseline.
func measureAcks(ctx context.Context, c config, procs *redistest.Procs) ([]*ackRow, error) {
	alone, err := procs.Server()
	if err != nil {
		return nil, err
	}
	primary, err := procs.Server()
	if err != nil {
		return nil, err
	}
	if err := procs.Do(func(tb testing.TB) { redistest.StartReplica(tb, primary) }); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	if err := failover.AwaitReplicas(ctx, primary.Client(), 1); err != nil {
		return nil, err
	}
	rows := []*ackRow{{name: "no replica (WAIT 0)", srv: alone, rdb: alone.Client()},
		{name: "1 replica, healthy link (WAIT 1)", replicas: 1, srv: primary, rdb: primary.Client()}}
	for i := range max(c.reps, 1) {
		for j := range rows {
			r := rows[(i+j)%len(rows)]
			progress("lease acknowledgement %d/%d: %s", i+1, c.reps, r.name)
			run, err := measureHotProcesses(ctx, c, r.srv.Addr(), r.rdb, ackAlgorithm, true)
			if err != nil {
				return rows, fmt.Errorf("hot identity, %s: %w", r.name, err)
			}
			r.runs = append(r.runs, run)
		}
	}
	return rows, nil
}
