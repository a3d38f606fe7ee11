package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestScriptFlushDuringLoad: while goroutines check for 2 s, another runs SCRIPT FLUSH every
// 10 ms. Every NOSCRIPT is absorbed by the EVAL fallback: no decision is made without Redis.
func TestScriptFlushDuringLoad(t *testing.T) {
	redistest.RequireRedis(t)
	for _, pipelining := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipelining=%v", pipelining), func(t *testing.T) {
			srv := redistest.StartServer(t)
			admin := srv.Client()
			l := newLimiter(t, srv.Client(), Options{Pipelining: pipelining, Timeout: 3 * time.Second})
			policies := make([]*Policy, len(algorithms))
			for i, alg := range algorithms {
				policies[i] = newPolicy(t, alg, FailOpen, perHour("hourly", 1_000_000))
			}
			evalsBefore := commandCalls(t, admin.Info(context.Background(), "commandstats").Val(), "eval")

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var (
				wg        sync.WaitGroup
				flushes   atomic.Int64
				decisions atomic.Int64
				mu        sync.Mutex
				bad       []Decision
			)
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
						if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
							t.Errorf("SCRIPT FLUSH: %v", err)
							return
						}
						flushes.Add(1)
					}
				}
			}()
			const checkers, maxAttempts = 8, 50_000
			for g := range checkers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < maxAttempts && ctx.Err() == nil; i++ {
						// The checks' own context is not the 2 s one, so the end of the test does
						// not cancel a check in flight.
						d := l.Check(context.Background(), policies[i%len(policies)],
							Request{Identity: fmt.Sprintf("id-%d", g)})
						decisions.Add(1)
						if d.Source != SourceRedis {
							mu.Lock()
							bad = append(bad, d)
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()

			fallbacks := commandCalls(t, admin.Info(context.Background(), "commandstats").Val(), "eval") - evalsBefore
			t.Logf("%d decisions, %d SCRIPT FLUSHes, %d NOSCRIPT fallbacks to EVAL, %d decisions without Redis",
				decisions.Load(), flushes.Load(), fallbacks, len(bad))
			if len(bad) > 0 {
				t.Fatalf("%d decisions without Redis, first: %+v", len(bad), bad[0])
			}
			if flushes.Load() < 20 || fallbacks < 2 {
				t.Fatalf("the flushes did not bite: %d flushes, %d EVAL fallbacks", flushes.Load(), fallbacks)
			}
		})
	}
}

// failureSource is the Source of decisions made without Redis under each failure mode.
var failureSource = map[FailureMode]Source{FailOpen: SourceFailOpen, FailClosed: SourceFailClosed, LocalCap: SourceLocalCap}

// checkFallback reports a decision that is not a proper failure-mode decision of mode.
func checkFallback(t testing.TB, what string, d Decision, mode FailureMode) {
	t.Helper()
	if d.Source != failureSource[mode] || !d.WithoutRedis() || d.Err == nil {
		t.Fatalf("%s: %+v, want Source %s, WithoutRedis, non-nil Err", what, d, failureSource[mode])
	}
	switch mode {
	case FailOpen:
		if !d.Allowed {
			t.Fatalf("%s: FailOpen denied: %+v", what, d)
		}
	case FailClosed:
		if d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("%s: FailClosed: %+v, want denied with a retry-after", what, d)
		}
	}
}

// TestRedisKilled kills Redis under a bounded load, for each failure mode: the failure mode
// decides (FailOpen admits, FailClosed denies, LocalCap admits its local cap of 3 per identity
// and then denies); once the breaker is open a check costs microseconds, not the 50 ms
// timeout; and after a restart on the same port the same Limiter and client go back to Redis.
func TestRedisKilled(t *testing.T) {
	redistest.RequireRedis(t)
	for _, mode := range []FailureMode{FailOpen, FailClosed, LocalCap} {
		t.Run(string(mode), func(t *testing.T) {
			srv := redistest.StartServer(t)
			l := newLimiter(t, srv.Client(), Options{Timeout: 50 * time.Millisecond}) // the production default; breaker 5 failures
			p := newPolicy(t, TokenBucket, mode, perHour("hourly", 1_000_000))
			mustCheck(t, l, p, Request{Identity: "warm-up"})

			killUnderLoad(t, srv, l, p, mode)
			timeOpenBreaker(t, l, p, mode)
			if mode == LocalCap {
				checkLocalCapExact(t, l, p)
			}

			srv.Restart(t)
			waitRedisAgain(t, l, p, "recovered", 10*time.Second, "no decision from Redis after the restart")
			for range 20 {
				mustCheck(t, l, p, Request{Identity: "recovered"})
			}
		})
	}
}

// killUnderLoad runs 4 goroutines x 500 checks, kills Redis once 40 are done, and checks that
// every decision made after the kill is the failure mode's, and (LocalCap) that each
// identity's local decisions admit exactly the cap of 3 first and deny the rest.
func killUnderLoad(t *testing.T, srv *redistest.Server, l *Limiter, p *Policy, mode FailureMode) {
	t.Helper()
	const workers, attempts = 4, 500
	type timed struct {
		start time.Time
		d     Decision
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		wg   sync.WaitGroup
		done atomic.Int64
		seqs = make([][]timed, workers)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range attempts {
				start := time.Now()
				d := l.Check(ctx, p, Request{Identity: fmt.Sprintf("load-%d", w)})
				seqs[w] = append(seqs[w], timed{start, d})
				done.Add(1)
			}
		}()
	}
	if _, err := waitFor(10*time.Second, time.Millisecond, func() error {
		if n := done.Load(); n < 40 {
			return fmt.Errorf("%d of 40 checks done", n)
		}
		return nil
	}); err != nil {
		t.Errorf("load did not get going: %v", err)
	}
	srv.Kill()
	killed := time.Now()
	wg.Wait()

	var before, after int
	for w, seq := range seqs {
		var local []Decision
		for i, x := range seq {
			if x.d.Source == SourceRedis {
				if x.start.After(killed) {
					t.Fatalf("worker %d, check %d: decision from Redis, started after Redis was killed", w, i)
				}
				before++
				continue
			}
			checkFallback(t, fmt.Sprintf("worker %d, check %d", w, i), x.d, mode)
			local = append(local, x.d)
			after++
		}
		if mode != LocalCap {
			continue
		}
		for i, d := range local {
			if want := i < 3; d.Allowed != want {
				t.Fatalf("identity load-%d, local decision %d: allowed=%v, want %v (cap 3): %+v", w, i, d.Allowed, want, d)
			}
		}
	}
	t.Logf("%s: %d decisions from Redis, then %d without it after the kill", mode, before, after)
	if after == 0 {
		t.Fatalf("no decision was made without Redis after the kill")
	}
}

// openBreaker checks identity against a dead Redis until the breaker opens, failing the
// test when 200 checks do not open it.
func openBreaker(t *testing.T, l *Limiter, p *Policy, identity string) {
	t.Helper()
	for range 200 {
		if d := l.Check(context.Background(), p, Request{Identity: identity}); errors.Is(d.Err, ErrCircuitOpen) {
			return
		}
	}
	t.Fatalf("breaker did not open in 200 checks against a dead Redis")
}

// timeOpenBreaker waits (bounded) for the breaker to open, then times 2000 checks: each is a
// failure-mode decision and the median costs well under a millisecond.
func timeOpenBreaker(t *testing.T, l *Limiter, p *Policy, mode FailureMode) {
	t.Helper()
	openBreaker(t, l, p, "probe")
	const n = 2000
	took := make([]time.Duration, 0, n)
	circuitOpen := 0
	for i := range n {
		start := time.Now()
		d := l.Check(context.Background(), p, Request{Identity: fmt.Sprintf("timed-%d", i%50)})
		took = append(took, time.Since(start))
		checkFallback(t, fmt.Sprintf("timed check %d", i), d, mode)
		if errors.Is(d.Err, ErrCircuitOpen) {
			circuitOpen++
		}
	}
	p50, p99 := percentile(took, 50), percentile(took, 99)
	t.Logf("%s: dead Redis, breaker open: %d checks, %d answered by the open circuit, p50 %s, p99 %s",
		mode, n, circuitOpen, p50, p99)
	if p50 >= time.Millisecond {
		t.Fatalf("median check with the breaker open took %s, want < 1ms", p50)
	}
}

// checkLocalCapExact: with Redis dead, each identity gets exactly the local cap (3 per hour)
// in order, then denials; and concurrent checks on one identity admit exactly 3 in all.
func checkLocalCapExact(t *testing.T, l *Limiter, p *Policy) {
	t.Helper()
	for i := range 10 {
		id := fmt.Sprintf("capped-%d", i)
		for j := range 6 {
			d := l.Check(context.Background(), p, Request{Identity: id})
			checkFallback(t, id, d, LocalCap)
			if j < 3 && (!d.Allowed || d.Remaining != int64(2-j) || d.Limit != 3) {
				t.Fatalf("%s check %d: %+v, want admitted with %d of 3 left", id, j, d, 2-j)
			}
			if j >= 3 && (d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Hour) {
				t.Fatalf("%s check %d: %+v, want denied with 0 < retry-after <= 1h", id, j, d)
			}
		}
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				if l.Check(context.Background(), p, Request{Identity: "concurrent"}).Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 3 {
		t.Fatalf("64 concurrent local checks of one identity admitted %d, want the cap of 3", admitted.Load())
	}
}

// TestStalledRedisTimeout: a Redis that is alive but does not answer (CLIENT PAUSE 1000 ALL)
// costs a check about the configured Timeout (20ms), not the stall: the failure mode decides
// in well under 500 ms. The clients have go-redis's default options (as the harness hands
// them out), and, as a control, ContextTimeoutEnabled set.
func TestStalledRedisTimeout(t *testing.T) {
	redistest.RequireRedis(t)
	for _, tc := range []struct {
		pipelining, ctxTimeouts bool
	}{{false, false}, {true, false}, {false, true}} {
		t.Run(fmt.Sprintf("pipelining=%v/ContextTimeoutEnabled=%v", tc.pipelining, tc.ctxTimeouts), func(t *testing.T) {
			srv := redistest.StartServer(t)
			admin := srv.Client()
			opts := srv.Options()
			opts.ContextTimeoutEnabled = tc.ctxTimeouts
			rdb := redis.NewClient(opts)
			t.Cleanup(func() { _ = rdb.Close() })
			l := newLimiter(t, rdb, Options{Timeout: 20 * time.Millisecond, Pipelining: tc.pipelining})
			p := newPolicy(t, GCRA, FailClosed, perHour("hourly", 1000))
			mustCheck(t, l, p, Request{Identity: "a"})

			if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 1000, "ALL").Err(); err != nil {
				t.Fatalf("CLIENT PAUSE: %v", err)
			}
			paused := time.Now()
			for i := range 3 {
				start := time.Now()
				d := l.Check(context.Background(), p, Request{Identity: "a"})
				took := time.Since(start)
				t.Logf("stalled Redis, check %d: %s after %s (%v)", i, d.Source, took.Round(time.Millisecond), d.Err)
				if took >= 500*time.Millisecond {
					t.Errorf("check %d against a stalled Redis took %s, want about the 20ms Timeout (< 500ms)", i, took)
				}
				if d.Source != SourceFailClosed || d.Allowed || d.Err == nil {
					t.Errorf("check %d against a stalled Redis: %+v, want a FailClosed decision with an error", i, d)
				}
			}
			// Bounded: the pause ends after 1 s and Redis answers again.
			if took, err := waitFor(5*time.Second, 20*time.Millisecond, byRedis(l, p, "a")); err != nil {
				t.Fatalf("after the pause (started %s ago): %v", time.Since(paused).Round(time.Millisecond), err)
			} else {
				t.Logf("decisions from Redis again %s after the pause started (polled for %s)",
					time.Since(paused).Round(time.Millisecond), took.Round(time.Millisecond))
			}
		})
	}
}

// TestBreakerRecoversAfterCanceledProbe: the half-open probe of the breaker is whatever check
// comes first after the cooldown. If its caller's context is already canceled (a client that
// went away), the probe tells nothing about Redis; the breaker must still let a later check
// probe again, so that the Limiter goes back to Redis once Redis is back.
func TestBreakerRecoversAfterCanceledProbe(t *testing.T) {
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t)
	l := newLimiter(t, srv.Client(), Options{BreakerCooldown: 50 * time.Millisecond})
	p := newPolicy(t, FixedWindow, FailClosed, perHour("hourly", 1000))
	mustCheck(t, l, p, Request{Identity: "a"})

	srv.Kill()
	openBreaker(t, l, p, "a")
	time.Sleep(200 * time.Millisecond) // past the cooldown: the next check is the probe
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if d := l.Check(canceled, p, Request{Identity: "a"}); d.Source != SourceFailClosed {
		t.Fatalf("check with a canceled context: %+v, want FailClosed", d)
	}

	srv.Restart(t)
	waitRedisAgain(t, l, p, "a", 5*time.Second, "Redis is back, but the Limiter never asks it again after a canceled probe")
}
