package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchredis"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// hotRow is one algorithm's hot-key figures: one identity checked by c.callers goroutines
// split over two worker processes (two sidecars) with leases off (today) and on, and the
// over-admission check with leases on.
type hotRow struct {
	alg     limiter.Algorithm
	off, on []hotRun
	over    overResult
	// bound is the under-admission bound of the over-admission check: two sidecars times
	// the largest lease either took.
	bound int64
}

// hotRun is one measurement, the script calls Redis ran for it and the decisions they
// served (warm-ups included), and over the measured run the lease calls, the leases held
// unacknowledged and the worse worker's median lease round trip.
type hotRun struct {
	stats        load.Stats
	calls        int64
	decisions    int
	leases, held int64
	leaseP50     time.Duration
}

// perDecision is Redis script calls per decision.
func (h hotRun) perDecision() float64 { return float64(h.calls) / float64(max(h.decisions, 1)) }

// coldResult is the cost of cold identities (c.identities of them) with leases off and on.
type coldResult struct {
	off, on []load.Stats
}

// hotLimit is the hot identity's limit, far above what the box reaches, so that it stays
// under its limit: a billion per 1000 hours for the windows, the finest TokenBucket and
// GCRA rate (one per µs) with a burst of a second's worth.
func hotLimit(alg limiter.Algorithm) limiter.Limit {
	if alg == limiter.TokenBucket || alg == limiter.GCRA {
		return limiter.Limit{Name: "hot", Requests: 1_000_000, Period: time.Second}
	}
	return limiter.Limit{Name: "hot", Requests: 1_000_000_000, Period: overPeriod}
}

// withLeases is p with leases on or off.
func withLeases(p *limiter.Policy, on bool) (*limiter.Policy, error) {
	s := p.Spec
	s.Leases = on
	q, err := limiter.NewPolicy(s)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return q, nil
}

// measureHotKeys runs the hot-key section on the standalone server: per algorithm the hot
// identity with leases off and on (c.reps runs each, alternating), the over-admission check
// with leases, and the cold-identity cost.
func measureHotKeys(ctx context.Context, c config, srv *redistest.Server, rdb *redis.Client) ([]*hotRow, coldResult, error) {
	var rows []*hotRow
	for _, a := range algorithms {
		alg := limiter.Algorithm(a.alg)
		row := &hotRow{alg: alg}
		for i := range max(c.reps, 1) {
			for _, on := range []bool{false, true} {
				progress("hot identity %d/%d: %s, leases %v", i+1, c.reps, alg, on)
				run, err := measureHotProcesses(ctx, c, srv.Addr(), rdb, alg, on)
				if err != nil {
					return rows, coldResult{}, fmt.Errorf("hot %s: %w", alg, err)
				}
				if on {
					row.on = append(row.on, run)
				} else {
					row.off = append(row.off, run)
				}
			}
		}
		progress("over-admission with leases: %s", alg)
		var err error
		if row.over, row.bound, err = leaseOverAdmission(ctx, c, srv, alg); err != nil {
			return rows, coldResult{}, err
		}
		rows = append(rows, row)
	}
	cold, err := measureCold(ctx, c, rdb)
	return rows, cold, err
}

// hotDuration is the length of one hot-identity run: short, the section has 4x2xreps.
func hotDuration(c config) time.Duration { return min(c.duration, time.Second) }

// scriptCallsOf is EVALSHA plus EVAL calls so far (INFO commandstats).
func scriptCallsOf(ctx context.Context, rdb redis.Cmdable) (int64, error) {
	var n int64
	for _, cmd := range []string{"evalsha", "eval"} {
		s, err := benchredis.Commandstat(ctx, rdb, cmd)
		if err != nil {
			return 0, err
		}
		n += s.Calls
	}
	return n, nil
}

// sidecarLimiters is n pipelining limiters, each on its own Redis client, as n sidecars.
func sidecarLimiters(c config, srv *redistest.Server, n int, o limiter.LeaseOptions) ([]*limiter.Limiter, func(), error) {
	var lims []*limiter.Limiter
	var clients []*redis.Client
	closeAll := func() {
		for _, l := range lims {
			l.Close()
		}
		for _, cl := range clients {
			_ = cl.Close()
		}
	}
	for range n {
		cl := newClient(srv, c.callers/n+1)
		clients = append(clients, cl)
		l, err := limiter.New(cl, limiter.Options{Pipelining: true, Workers: c.workers, Timeout: time.Second, Leases: o})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("limiter: %w", err)
		}
		lims = append(lims, l)
	}
	return lims, closeAll, nil
}

// leaseOverAdmission is the over-admission check (L per overPeriod, c.overCallers callers,
// about 2L checks, c.reps runs) through two sidecars with leases on, and the
// under-admission bound: two times the largest lease taken.
func leaseOverAdmission(ctx context.Context, c config, srv *redistest.Server, alg limiter.Algorithm) (overResult, int64, error) {
	var mu sync.Mutex
	var largest int64
	onLease := func(_ *limiter.Policy, granted, _ int64) {
		mu.Lock()
		largest = max(largest, granted)
		mu.Unlock()
	}
	lims, closeAll, err := sidecarLimiters(c, srv, 2, limiter.LeaseOptions{OnLease: onLease})
	if err != nil {
		return overResult{}, 0, err
	}
	defer closeAll()
	base, err := newPolicy(alg, "bench", "overadmit-leases", limiter.Limit{Name: "rate", Requests: int64(c.overLimit), Period: overPeriod}, 0, limiter.FailClosed)
	if err != nil {
		return overResult{}, 0, err
	}
	p, err := withLeases(base, true)
	if err != nil {
		return overResult{}, 0, err
	}
	var deciders []decider
	for _, l := range lims {
		deciders = append(deciders, func(ctx context.Context, id string) (bool, error) {
			d := l.Check(ctx, p, limiter.Request{Identity: id})
			if d.WithoutRedis() {
				return false, fmt.Errorf("decided without Redis (%s): %w", d.Source, d.Err)
			}
			return d.Allowed, nil
		})
	}
	callers := max(c.overCallers, 1)
	per := (2*c.overLimit + callers - 1) / callers
	res := overResult{limit: c.overLimit, attempts: per * callers, fewest: c.overLimit}
	for run := range max(c.reps, 1) {
		admitted, err := hammer(ctx, deciders, callers, per, fmt.Sprintf("lease-overadmit-%s-%d-%d", alg, run, time.Now().UnixNano()))
		if err != nil {
			return res, 0, err
		}
		res.admitted, res.fewest, res.runs = max(res.admitted, admitted), min(res.fewest, admitted), res.runs+1
	}
	return res, 2 * largest, nil
}

// measureCold is the limiter column's load (c.identities identities, none hot) on
// TokenBucket with leases off and on, c.reps runs each, the order swapped every repetition
// so that neither setting always runs second (after the other's keys and garbage).
func measureCold(ctx context.Context, c config, rdb *redis.Client) (coldResult, error) {
	var res coldResult
	base, err := newPolicy(limiter.TokenBucket, "bench", "cold", limiter.Limit{Name: "rps", Requests: requestsPerSecond, Period: time.Second}, 0, limiter.FailOpen)
	if err != nil {
		return res, err
	}
	var errs []error
	for i := range max(c.reps, 1) {
		for _, on := range []bool{i%2 == 1, i%2 == 0} {
			progress("cold identities %d/%d: leases %v", i+1, c.reps, on)
			p, err := withLeases(base, on)
			if err != nil {
				return res, err
			}
			s, err := measureDirect(ctx, c, c.callers, rdb, p)
			errs = append(errs, err)
			if on {
				res.on = append(res.on, s)
			} else {
				res.off = append(res.off, s)
			}
		}
	}
	return res, errors.Join(errs...)
}
