package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// fcallReplicas is the section of issue 25 (-fcall-replicas): the tenant call path (FCALL)
// against EVALSHA, leases across a failover with a lagging replica, and what the
// acknowledgement of leases by the replicas costs.
type fcallReplicas struct {
	paths     []*callPathRow
	functions functionsLimiter
	failovers []failoverRow
	acks      []*ackRow
	err       error
}

// measureFCallReplicas runs the section on redis-server processes of its own, stopped by
// their PIDs before it returns. A failed part leaves the parts after it unmeasured.
func measureFCallReplicas(ctx context.Context, c config) (res *fcallReplicas) {
	res = &fcallReplicas{}
	procs := redistest.NewProcs()
	defer func() { res.err = errors.Join(res.err, procs.Close()) }()
	srv, err := procs.Server()
	if err != nil {
		res.err = err
		return res
	}
	rdb := newClient(srv, c.callers)
	defer func() { _ = rdb.Close() }()
	for _, part := range []func() error{
		func() (err error) { res.paths, err = measureCallPaths(ctx, c, rdb, srv.Port()); return err },
		func() (err error) { res.functions, err = measureFunctionsLimiter(ctx, c, rdb); return err },
		func() (err error) { res.failovers, err = measureFailovers(ctx); return err },
		func() (err error) { res.acks, err = measureAcks(ctx, c, procs); return err },
	} {
		if res.err = part(); res.err != nil {
			break
		}
	}
	return res
}

// overAdmitted names the algorithms whose leases admitted more across a failover than the
// same failover without leases.
func (f *fcallReplicas) overAdmitted() []string {
	var names []string
	for _, r := range f.failovers {
		if r.excess() > 0 {
			names = append(names, fmt.Sprintf("%s leases across a failover (+%d over the run without)", r.alg, r.excess()))
		}
	}
	return names
}
