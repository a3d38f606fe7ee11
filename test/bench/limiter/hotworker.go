package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
)

// hotWorkerEnv, when set in the environment, makes this binary (the bench command or its
// test binary) a hot-identity worker, one "sidecar" process: it runs the job the variable
// holds as JSON and prints its figures as JSON on stdout.
const hotWorkerEnv = "LIMITER_BENCH_HOT_WORKER"

// hotJob is one worker's job.
type hotJob struct {
	Addr      string            `json:"addr"`
	Algorithm limiter.Algorithm `json:"algorithm"`
	Leases    bool              `json:"leases"`
	Callers   int               `json:"callers"`
	Workers   int               `json:"workers"`
	// StartAt (Unix ns) is when both workers begin, after their warm-up.
	StartAt  int64         `json:"startAt"`
	Warmup   time.Duration `json:"warmup"`
	Duration time.Duration `json:"duration"`
}

// hotFigures is what a worker reports: its measured run and every decision it made, and
// over the measured run its lease calls, the leases held unspent (not acknowledged by every
// replica) and the median lease round trip.
type hotFigures struct {
	Stats     load.Stats    `json:"stats"`
	Decisions int           `json:"decisions"`
	Leases    int64         `json:"leases"`
	Held      int64         `json:"held"`
	LeaseP50  time.Duration `json:"leaseP50"`
}

// runHotWorker runs the job in the environment, if any, and reports whether it did.
func runHotWorker() bool {
	spec := os.Getenv(hotWorkerEnv)
	if spec == "" {
		return false
	}
	var job hotJob
	err := json.Unmarshal([]byte(spec), &job)
	var out hotFigures
	if err == nil {
		out, err = job.run(context.Background())
	}
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hot worker:", err)
		os.Exit(1)
	}
	return true
}

// run is the worker: its own Redis client and limiter (pipelining), c.Callers goroutines
// checking identity "celebrity" back to back: a warm-up, then, from StartAt, the run.
func (j hotJob) run(ctx context.Context) (hotFigures, error) {
	rdb := redis.NewClient(&redis.Options{Addr: j.Addr, PoolSize: j.Callers + 1, ContextTimeoutEnabled: true})
	defer func() { _ = rdb.Close() }()
	var leases leaseStats
	rdb.AddHook(&leases)
	l, err := limiter.New(rdb, limiter.Options{Pipelining: true, Workers: j.Workers, Timeout: time.Second, Leases: leases.options()})
	if err != nil {
		return hotFigures{}, fmt.Errorf("limiter: %w", err)
	}
	defer l.Close()
	base, err := newPolicy(j.Algorithm, "bench", "hot", hotLimit(j.Algorithm), 0, limiter.FailOpen)
	if err != nil {
		return hotFigures{}, err
	}
	p, err := withLeases(base, j.Leases)
	if err != nil {
		return hotFigures{}, err
	}
	call := func(ctx context.Context, _ int, _ *rand.Rand) (load.Outcome, error) {
		return outcome(l.Check(ctx, p, limiter.Request{Identity: "celebrity"})), nil
	}
	warm, err := load.Drive(ctx, j.Callers, j.Warmup, call)
	if err != nil {
		return hotFigures{}, err
	}
	time.Sleep(time.Until(time.Unix(0, j.StartAt)))
	calls0, held0 := leases.mark()
	s, err := load.Drive(ctx, j.Callers, j.Duration, call)
	return hotFigures{Stats: s, Decisions: warm.Calls + s.Calls,
		Leases: leases.calls.Load() - calls0, Held: leases.held.Load() - held0, LeaseP50: leases.tripP50()}, err
}

// measureHotProcesses runs two worker processes (two sidecars) on the hot identity, leases
// on or off, and sums them: decisions/s added, p50 and p99 the worse worker's, and script
// calls per decision over everything the workers did, warm-ups included.
func measureHotProcesses(ctx context.Context, c config, addr string, rdb redis.Cmdable, alg limiter.Algorithm, on bool) (hotRun, error) {
	self, err := os.Executable()
	if err != nil {
		return hotRun{}, fmt.Errorf("bench executable: %w", err)
	}
	if err := flushAll(ctx, rdb.(redis.UniversalClient)); err != nil {
		return hotRun{}, err
	}
	job := hotJob{Addr: addr, Algorithm: alg, Leases: on, Callers: max(c.callers/2, 1), Workers: c.workers,
		Warmup: warmup(c), Duration: hotDuration(c)}
	// Both start measuring together, once both have started and warmed up.
	job.StartAt = time.Now().Add(time.Second + job.Warmup).UnixNano()
	calls0, err := scriptCallsOf(ctx, rdb)
	if err != nil {
		return hotRun{}, err
	}
	figs, err := runWorkers(ctx, self, job, 2)
	if err != nil {
		return hotRun{}, err
	}
	calls1, err := scriptCallsOf(ctx, rdb)
	if err != nil {
		return hotRun{}, err
	}
	var run hotRun
	decisions := 0
	for _, f := range figs {
		run.stats.Calls += f.Stats.Calls
		run.stats.PerSec += f.Stats.PerSec
		run.stats.P50, run.stats.P99 = max(run.stats.P50, f.Stats.P50), max(run.stats.P99, f.Stats.P99)
		run.stats.Fallbacks += f.Stats.Fallbacks
		decisions += f.Decisions
	}
	run.calls = calls1 - calls0
	run.decisions = decisions
	run.leases, run.held, run.leaseP50 = leaseFigures(figs)
	if run.stats.Fallbacks > 0 {
		return run, fmt.Errorf("%d decisions without Redis", run.stats.Fallbacks)
	}
	return run, nil
}

// runWorkers starts n workers of job at once and waits for their figures.
func runWorkers(ctx context.Context, self string, job hotJob, n int) ([]hotFigures, error) {
	spec, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("worker job: %w", err)
	}
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, self) // this very binary, as a worker
		cmds[i].Env = append(os.Environ(), hotWorkerEnv+"="+string(spec))
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], os.Stderr
		if err := cmds[i].Start(); err != nil {
			return nil, fmt.Errorf("start worker: %w", err)
		}
	}
	var errs []error
	figs := make([]hotFigures, n)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", i, err))
			continue
		}
		if err := json.Unmarshal(outs[i].Bytes(), &figs[i]); err != nil {
			errs = append(errs, fmt.Errorf("worker %d output: %w", i, err))
		}
	}
	return figs, errors.Join(errs...)
}

// leaseFigures sums the workers' lease calls and held leases, with the worse worker's median
// lease round trip.
func leaseFigures(figs []hotFigures) (leases, held int64, p50 time.Duration) {
	for _, f := range figs {
		leases, held, p50 = leases+f.Leases, held+f.Held, max(p50, f.LeaseP50)
	}
	return leases, held, p50
}
