package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts/loader"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchredis"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
)

// Issue 25, item 1: in tenant mode the sidecars call the scripts as Redis functions (FCALL)
// the manager loaded, never with EVALSHA. This file measures what that path costs against
// EVALSHA: in Redis (redis-benchmark and INFO commandstats) and through the Go limiter.

// callPathRow is one algorithm's check script through redis-benchmark as EVALSHA and as
// FCALL of the same body, one ceiling per run.
type callPathRow struct {
	alg            limiter.Algorithm
	evalsha, fcall []benchredis.Ceiling
}

// functionsLimiter is the Go limiter's runs on TokenBucket with Spec.Functions off (EVALSHA)
// and on (FCALL).
type functionsLimiter struct {
	off, on []load.Stats
}

// callPathCalls is the redis-benchmark calls of one run of the section: a third of the
// table's, enough for a stable median at a fraction of the time.
func callPathCalls(c config) int { return max(c.benchCalls/3, 1000) }

// callPathPolicy is the policy of the call-path runs: one limit of requestsPerSecond per
// second per identity, as the table's.
func callPathPolicy(alg limiter.Algorithm, functions bool) (*limiter.Policy, error) {
	p, err := newPolicy(alg, "bench", "call-path", limiter.Limit{Name: "rps", Requests: requestsPerSecond, Period: time.Second}, 0, limiter.FailOpen)
	if err != nil || !functions {
		return p, err
	}
	s := p.Spec
	s.Functions = true
	if p, err = limiter.NewPolicy(s); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}

// callPathSpec is redis-benchmark running p's check script with the keys and arguments one
// check sends, as EVALSHA or, with fcall, as FCALL of its function library.
func callPathSpec(c config, p *limiter.Policy, fcall bool) benchredis.BenchmarkSpec {
	spec := ceilingSpec(c, &row{policy: p})
	spec.Calls = callPathCalls(c)
	if fcall {
		spec.Function, spec.Library = p.Script().Function, p.Script().Library()
	}
	return spec
}

// measureCallPaths runs every algorithm's script as EVALSHA and as FCALL, c.reps times,
// going round the algorithms and swapping which of the two runs first every repetition.
func measureCallPaths(ctx context.Context, c config, rdb *redis.Client, port int) ([]*callPathRow, error) {
	var rows []*callPathRow
	for _, a := range algorithms {
		rows = append(rows, &callPathRow{alg: limiter.Algorithm(a.alg)})
	}
	for i := range max(c.reps, 1) {
		for _, r := range rows {
			p, err := callPathPolicy(r.alg, false)
			if err != nil {
				return rows, err
			}
			for _, fcall := range []bool{i%2 == 1, i%2 == 0} {
				progress("call path %d/%d: %s, FCALL %v", i+1, c.reps, r.alg, fcall)
				ceil, err := benchredis.Benchmark(ctx, rdb, port, callPathSpec(c, p, fcall))
				if err != nil {
					return rows, fmt.Errorf("%s call path: %w", r.alg, err)
				}
				if fcall {
					r.fcall = append(r.fcall, ceil)
				} else {
					r.evalsha = append(r.evalsha, ceil)
				}
			}
		}
	}
	return rows, nil
}

// measureFunctionsLimiter is the limiter column's load (pipelined, c.callers callers over
// c.identities identities) on TokenBucket with Spec.Functions off and on, c.reps runs of
// hotDuration each, the order swapped every repetition; the function library is loaded
// first, as the manager does in tenant mode.
func measureFunctionsLimiter(ctx context.Context, c config, rdb *redis.Client) (functionsLimiter, error) {
	var res functionsLimiter
	off, err := callPathPolicy(limiter.TokenBucket, false)
	if err != nil {
		return res, err
	}
	on, err := callPathPolicy(limiter.TokenBucket, true)
	if err != nil {
		return res, err
	}
	// Every library, as the manager loads them: the limiter calls more than the policy's one
	// check script (shared checks, leases), and a missing function is a decision without Redis.
	if err := (&loader.ScriptLoader{Client: rdb, Functions: true, Log: logr.Discard()}).Ensure(ctx); err != nil {
		return res, fmt.Errorf("function load: %w", err)
	}
	short := c
	short.duration = hotDuration(c)
	for i := range max(c.reps, 1) {
		for _, fcall := range []bool{i%2 == 1, i%2 == 0} {
			progress("limiter %d/%d: TokenBucket, Spec.Functions %v", i+1, c.reps, fcall)
			p, runs := off, &res.off
			if fcall {
				p, runs = on, &res.on
			}
			s, err := measureDirect(ctx, short, c.callers, rdb, p)
			if err == nil && s.Fallbacks > 0 {
				err = fmt.Errorf("%d of %d checks decided without Redis", s.Fallbacks, s.Calls)
			}
			if err != nil {
				return res, fmt.Errorf("limiter, Spec.Functions %v: %w", fcall, err)
			}
			*runs = append(*runs, s)
		}
	}
	return res, nil
}
