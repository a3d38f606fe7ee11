package limiter

import (
	"strings"
	"testing"
	"time"
)

func TestNewPolicyRejects(t *testing.T) {
	good := func() PolicyConfig {
		return PolicyConfig{Namespace: "ns", Name: "p", Algorithm: TokenBucket,
			Limits:   []Limit{{Name: "a", Requests: 1, Period: time.Second}},
			StateKey: "{rl:${namespace}/${policy}:${identity}}:${limit}", TTL: time.Minute,
			FailureMode: FailOpen}
	}
	if _, err := NewPolicy(good()); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	cases := []struct {
		name   string
		change func(*PolicyConfig)
		want   string
	}{
		{"unknown algorithm", func(c *PolicyConfig) { c.Algorithm = "Leaky" }, "unknown algorithm"},
		{"no limits", func(c *PolicyConfig) { c.Limits = nil }, "1 to 8 limits"},
		{"zero requests", func(c *PolicyConfig) { c.Limits[0].Requests = 0 }, "limits[0].requests: must be at least 1"},
		{"sub-ms period", func(c *PolicyConfig) { c.Limits[0].Period = time.Microsecond }, "limits[0].period: must be at least 1ms"},
		{"no ttl", func(c *PolicyConfig) { c.TTL = 0 }, "ttl"},
		{"no state key", func(c *PolicyConfig) { c.StateKey = "" }, "keyLayout.state: a state key template is required"},
		{"bad template", func(c *PolicyConfig) { c.StateKey = "{rl:${user}}" }, "user"},
		{"two limits without ${limit}", func(c *PolicyConfig) {
			c.Limits = append(c.Limits, Limit{Name: "b", Requests: 2, Period: time.Second})
			c.StateKey = "{rl:${identity}}"
		}, "must use ${limit}"},
		{"multi-key without tag", func(c *PolicyConfig) {
			c.Limits = append(c.Limits, Limit{Name: "b", Requests: 2, Period: time.Second})
			c.Algorithm, c.StateKey = SlidingWindow, "rl:${identity}:${limit}"
		}, "no hash tag"},
		{"identity runs into text", func(c *PolicyConfig) { c.StateKey = "{rl:${identity}x}:${limit}" }, "must be followed by"},
		{"idempotency without ${requestId}", func(c *PolicyConfig) {
			c.IdempotencyKey, c.IdempotencyTTL = "{rl:${namespace}/${policy}:${identity}}:idem", time.Minute
		}, "must use ${requestId}"},
		{"idempotency on another tag", func(c *PolicyConfig) {
			c.IdempotencyKey, c.IdempotencyTTL = "{idem:${identity}}:${requestId}", time.Minute
		}, "keyLayout.idempotency"},
		{"idempotency without ttl", func(c *PolicyConfig) {
			c.IdempotencyKey = "{rl:${namespace}/${policy}:${identity}}:${requestId}"
		}, "idempotency.ttl"},
		{"ttl below the horizon", func(c *PolicyConfig) { c.Limits[0].Period = time.Hour }, "shorter than the TokenBucket horizon 1h0m0s"},
		{"faster than one per microsecond", func(c *PolicyConfig) {
			c.Algorithm, c.Limits[0].Requests, c.Limits[0].Period = GCRA, 2000, time.Millisecond
		}, "more than one request per microsecond"},
		{"LocalCap without cap", func(c *PolicyConfig) { c.FailureMode = LocalCap }, "LocalCap needs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.change(&c)
			_, err := NewPolicy(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestHorizon(t *testing.T) {
	ls := []Limit{{Name: "s", Requests: 10, Period: time.Second}, {Name: "m", Requests: 100, Period: time.Minute, Burst: 50}}
	cases := map[Algorithm]time.Duration{
		FixedWindow:   time.Minute,
		SlidingWindow: 2 * time.Minute,
		TokenBucket:   30 * time.Second, // burst 50 at 100/min refills in 30s
		GCRA:          30 * time.Second,
	}
	for a, want := range cases {
		if got := Horizon(a, ls); got != want {
			t.Errorf("%s: horizon %s, want %s", a, got, want)
		}
	}
}
