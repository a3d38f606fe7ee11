package limiter

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestPipelineStats counts what concurrent checks sent: every check exactly once, in fewer
// round trips than checks, and Redis ran exactly one script call per check.
func TestPipelineStats(t *testing.T) {
	srv, rdb := standalone(t)
	sc := srv.Client()
	direct := newLimiter(t, rdb, Options{})
	if n, m := direct.PipelineStats(); n != 0 || m != 0 {
		t.Errorf("without pipelining PipelineStats = %d, %d; want 0, 0", n, m)
	}
	l := newLimiter(t, rdb, Options{Pipelining: true})
	p := newPolicy(t, TokenBucket, FailClosed, Limit{Name: "per-hour", Requests: 1000, Period: time.Hour})
	mustCheck(t, l, p, Request{Identity: "warm"}) // loads the script: no NOSCRIPT retries below
	pipes0, checks0 := l.PipelineStats()
	calls0 := scriptCalls(t, sc)
	const goroutines, each = 64, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if d := l.Check(context.Background(), p, Request{Identity: fmt.Sprintf("id-%d-%d", g, i%5)}); d.WithoutRedis() {
					t.Errorf("check without Redis: %v", d.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	pipes, checks := l.PipelineStats()
	pipes, checks = pipes-pipes0, checks-checks0
	if checks != goroutines*each {
		t.Errorf("pipelines carried %d checks, want %d", checks, goroutines*each)
	}
	if pipes == 0 || pipes >= checks {
		t.Errorf("%d checks in %d pipelines: want batches of more than one under 64-way concurrency", checks, pipes)
	}
	// One policy's checks in a pipeline share a call (shared.go): about one call a pipeline
	// (two for the first shared call, loaded after NOSCRIPT), far fewer than checks.
	calls := scriptCalls(t, sc) - calls0
	if calls > int64(pipes)+2 || calls < 1 {
		t.Errorf("Redis ran %d script calls for %d checks in %d pipelines: want about one a pipeline", calls, checks, pipes)
	}
	t.Logf("%d checks in %d pipelines (%.1f per pipeline), %d script calls", checks, pipes, float64(checks)/float64(pipes), calls)
}
