package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// algorithms lists every algorithm, for tests that run on each.
var algorithms = []Algorithm{TokenBucket, SlidingWindow, FixedWindow, GCRA}

const testTemplate = "{rl:${namespace}/${policy}:${identity}}:${limit}:${slot}"

var policySeq int

// newPolicy builds a policy with a fresh name (so tests never share keys) from limits.
func newPolicy(t testing.TB, alg Algorithm, mode FailureMode, limits ...Limit) *Policy {
	t.Helper()
	policySeq++
	c := Spec{Namespace: "test", Name: fmt.Sprintf("%s-%d-%d", alg, policySeq, time.Now().UnixNano()),
		Algorithm: alg, Limits: limits, StateKey: testTemplate,
		IdempotencyKey: "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}",
		TTL:            2 * time.Hour, IdempotencyTTL: time.Minute, IdempotencyMaxReplays: 10, FailureMode: mode}
	for _, l := range limits {
		// A sliding window counts for two periods; loadLimitFor's may be just over an hour.
		c.TTL = max(c.TTL, 2*l.Period)
	}
	if mode == LocalCap {
		c.LocalCap = &LocalCapConfig{Requests: 3, Period: time.Hour, MaxIdentities: 100}
	}
	p, err := NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

func perHour(name string, n int64) Limit {
	return Limit{Name: name, Requests: n, Period: time.Hour}
}

// standalone starts a real redis-server and returns a client on it.
func standalone(t testing.TB) (*redistest.Server, redis.UniversalClient) {
	t.Helper()
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t)
	return srv, srv.Client()
}

// Without a Timeout it uses 2s, not the production 50ms: on a loaded CI machine a check can
// take longer than 50ms, and a test about semantics must not see a failure mode decide.
// Tests about timeouts set their own.
func newLimiter(t testing.TB, rdb redis.UniversalClient, o Options) *Limiter {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	l, err := New(rdb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// eachAlgorithm runs f as a subtest per algorithm, each with a limiter (default options) on
// one standalone server shared by them.
func eachAlgorithm(t *testing.T, f func(t *testing.T, l *Limiter, alg Algorithm)) {
	t.Helper()
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) { f(t, l, alg) })
	}
}

// mustCheck runs a check that must be answered by Redis itself.
func mustCheck(t testing.TB, l *Limiter, p *Policy, r Request) Decision {
	t.Helper()
	d := l.Check(context.Background(), p, r)
	if d.Source != SourceRedis {
		t.Fatalf("decision from %s, want Redis: %v", d.Source, d.Err)
	}
	return d
}

// waitFor polls cond every interval until it returns nil or timeout passes, and returns how
// long it took or the last error.
func waitFor(timeout, interval time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	err := wait.Poll(timeout, interval, cond)
	return time.Since(start), err
}

// cfWait polls cond every 5 ms until it holds or timeout passes, and reports whether it held.
func cfWait(timeout time.Duration, cond func() bool) bool {
	return wait.Poll(timeout, 5*time.Millisecond, wait.Cond(cond)) == nil
}

// byRedis is a waitFor condition: a check of p for identity that Redis decided.
func byRedis(l *Limiter, p *Policy, identity string) func() error {
	return func() error {
		if d := l.Check(context.Background(), p, Request{Identity: identity}); d.Source != SourceRedis {
			return fmt.Errorf("decision from %s: %w", d.Source, d.Err)
		}
		return nil
	}
}

// waitRedisAgain waits up to timeout for l to have Redis decide a check of p for identity
// after Redis came back and logs how long that took; it fails the test with stuck when it
// did not happen.
func waitRedisAgain(t *testing.T, l *Limiter, p *Policy, identity string, timeout time.Duration, stuck string) {
	t.Helper()
	took, err := waitFor(timeout, 10*time.Millisecond, byRedis(l, p, identity))
	if err != nil {
		t.Fatalf("%s: %v", stuck, err)
	}
	t.Logf("decisions from Redis again %s after the restart", took.Round(time.Millisecond))
}
