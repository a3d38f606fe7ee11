package limiter

import (
	"context"
	"testing"
	"time"
)

// TestScriptSHAMatchesRedis proves the SHA computed in Go is the one SCRIPT LOAD returns, so
// EVALSHA finds what the controller preloaded.
func TestScriptSHAMatchesRedis(t *testing.T) {
	_, rdb := standalone(t)
	for _, s := range Scripts() {
		sha, err := rdb.ScriptLoad(context.Background(), s.Source).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD %s: %v", s.Name, err)
		}
		if sha != s.SHA {
			t.Errorf("%s: Go SHA %s, Redis SHA %s", s.Name, s.SHA, sha)
		}
	}
}

// TestBurstThenDeny: with no refill during the test, exactly the limit is admitted, remaining
// counts down, and the next request is denied by the named limit with a retry-after.
func TestBurstThenDeny(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		p := newPolicy(t, alg, FailOpen, perHour("hourly", 5))
		for i := int64(1); i <= 5; i++ {
			d := mustCheck(t, l, p, Request{Identity: "alice"})
			if !d.Allowed || d.Remaining != 5-i || d.Limit != 5 {
				t.Fatalf("request %d: %+v, want allowed with remaining %d of 5", i, d, 5-i)
			}
		}
		// A sliding window may need up to two periods: the full current window must
		// first become the previous one and then drain.
		maxRetry := time.Hour
		if alg == SlidingWindow {
			maxRetry = 2 * time.Hour
		}
		d := mustCheck(t, l, p, Request{Identity: "alice"})
		if d.Allowed || d.DeniedBy != "hourly" || d.RetryAfter <= 0 || d.RetryAfter > maxRetry {
			t.Fatalf("6th request: %+v, want denied by hourly with 0 < retry-after <= %s", d, maxRetry)
		}
		if d := mustCheck(t, l, p, Request{Identity: "bob"}); !d.Allowed {
			t.Fatalf("another identity is independent, got %+v", d)
		}
	})
}

// TestCost: a request debits its cost from every limit; a cost above the capacity is denied
// even on a full bucket and flagged as never admissible.
func TestCost(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		p := newPolicy(t, alg, FailOpen, perHour("hourly", 5))
		if d := mustCheck(t, l, p, Request{Identity: "a", Cost: 6}); d.Allowed || d.RetryAfter >= 0 {
			t.Fatalf("cost 6 of 5: %+v, want denied with negative retry-after (never)", d)
		}
		if d := mustCheck(t, l, p, Request{Identity: "a", Cost: 3}); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("cost 3: %+v, want allowed with 2 left", d)
		}
		if d := mustCheck(t, l, p, Request{Identity: "a", Cost: 3}); d.Allowed {
			t.Fatalf("cost 3 with 2 left: %+v, want denied", d)
		}
		if d := mustCheck(t, l, p, Request{Identity: "a", Cost: 2}); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("cost 2 with 2 left: %+v, want allowed with 0 left", d)
		}
	})
}

// TestMultiLimitAllOrNothing: a request denied by one limit debits none of them; the state
// keys are byte-identical before and after the denied call.
func TestMultiLimitAllOrNothing(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	ctx := context.Background()
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			p := newPolicy(t, alg, FailOpen, perHour("wide", 10), perHour("narrow", 3))
			for i := 0; i < 3; i++ {
				mustCheck(t, l, p, Request{Identity: "a"})
			}
			keys := p.Keys("a", "")
			before, err := rdb.MGet(ctx, keys...).Result()
			if err != nil {
				t.Fatal(err)
			}
			d := mustCheck(t, l, p, Request{Identity: "a"})
			if d.Allowed || d.DeniedBy != "narrow" {
				t.Fatalf("4th request: %+v, want denied by narrow", d)
			}
			after, _ := rdb.MGet(ctx, keys...).Result()
			for i := range keys {
				if before[i] != after[i] {
					t.Errorf("denied request changed %s", keys[i])
				}
			}
			if d := mustCheck(t, l, p, Request{Identity: "b"}); !d.Allowed || d.Remaining != 2 || d.Limit != 3 {
				t.Fatalf("remaining reports the tightest limit: %+v, want 2 of 3", d)
			}
		})
	}
}

// TestRetryAfterIsHonoured: a drained limit denies with a retry-after in the expected range
// and admits again once it has passed. A drained token bucket refills at requests/period;
// GCRA spaces requests by period/requests and its retry-after is exact (denied just before
// it, admitted at it); a fixed window's count is forgotten when the next window starts, and
// the retry-after of a denial is the end of the window.
func TestRetryAfterIsHonoured(t *testing.T) {
	cases := []struct {
		name     string
		alg      Algorithm
		limit    Limit
		admitted int           // requests admitted before the denial
		min, max time.Duration // the denial's retry-after
		slack    time.Duration // slept beyond the retry-after
		// remaining, when not negative, is what the admission after the retry-after leaves
		// (a fixed window, whose checks start 10ms into a window).
		remaining int64
	}{
		{name: "TokenBucketRefill", alg: TokenBucket, limit: Limit{Name: "fast", Requests: 10, Period: time.Second, Burst: 2},
			admitted: 2, min: time.Nanosecond, max: 100 * time.Millisecond, slack: 20 * time.Millisecond, remaining: -1},
		{name: "GCRARetryAfter", alg: GCRA, limit: Limit{Name: "smooth", Requests: 5, Period: time.Second, Burst: 1},
			admitted: 1, min: 150 * time.Millisecond, max: 200 * time.Millisecond, slack: 10 * time.Millisecond, remaining: -1},
		{name: "FixedWindowResets", alg: FixedWindow, limit: Limit{Name: "w", Requests: 2, Period: 300 * time.Millisecond},
			admitted: 2, min: time.Nanosecond, max: 300 * time.Millisecond, slack: 10 * time.Millisecond, remaining: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, rdb := standalone(t)
			l := newLimiter(t, rdb, Options{})
			p := newPolicy(t, c.alg, FailOpen, c.limit)
			if c.remaining >= 0 {
				sleepUntilWindowOffset(t, srv.Client(), c.limit.Period, 10*time.Millisecond)
			}
			for i := range c.admitted {
				if d := mustCheck(t, l, p, Request{Identity: "a"}); !d.Allowed {
					t.Fatalf("request %d: %+v, want allowed", i+1, d)
				}
			}
			d := mustCheck(t, l, p, Request{Identity: "a"})
			if d.Allowed || d.RetryAfter < c.min || d.RetryAfter > c.max {
				t.Fatalf("drained: %+v, want denied with retry-after in [%s, %s]", d, c.min, c.max)
			}
			time.Sleep(d.RetryAfter + c.slack)
			if d := mustCheck(t, l, p, Request{Identity: "a"}); !d.Allowed || (c.remaining >= 0 && d.Remaining != c.remaining) {
				t.Fatalf("after retry-after: %+v, want allowed (remaining %d unless negative)", d, c.remaining)
			}
		})
	}
}

// TestSlidingWindowWeighting: after a full window, the next window admits only the share the
// previous window's weight leaves, not a fresh full quota (which a fixed window would).
func TestSlidingWindowWeighting(t *testing.T) {
	srv, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	const period = 1000 * time.Millisecond
	p := newPolicy(t, SlidingWindow, FailOpen, Limit{Name: "w", Requests: 20, Period: period})
	sleepUntilWindowOffset(t, srv.Client(), period, 50*time.Millisecond)
	admitted := burst(t, l, p, 40)
	if admitted != 20 {
		t.Fatalf("first window admitted %d, want 20", admitted)
	}
	// Half-way into the next window the previous window still weighs about 10 of 20.
	sleepUntilWindowOffset(t, srv.Client(), period, 10*time.Millisecond)
	sleepUntilWindowOffset(t, srv.Client(), period, period/2)
	admitted = burst(t, l, p, 40)
	if admitted < 6 || admitted > 14 {
		t.Fatalf("half-way into the next window admitted %d, want about 10 (a fixed window would give 20)", admitted)
	}
}

func burst(t *testing.T, l *Limiter, p *Policy, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		if mustCheck(t, l, p, Request{Identity: "a"}).Allowed {
			admitted++
		}
	}
	return admitted
}
