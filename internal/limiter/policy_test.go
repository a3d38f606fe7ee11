package limiter

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestNewPolicyRejects(t *testing.T) {
	good := func() Spec {
		return Spec{Namespace: "ns", Name: "p", Algorithm: TokenBucket,
			Limits:   []Limit{{Name: "a", Requests: 1, Period: time.Second}},
			StateKey: "{rl:${namespace}/${policy}:${identity}}:${limit}", TTL: time.Minute,
			FailureMode: FailOpen}
	}
	if _, err := NewPolicy(good()); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	cases := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"unknown algorithm", func(c *Spec) { c.Algorithm = "Leaky" }, "unknown algorithm"},
		{"no limits", func(c *Spec) { c.Limits = nil }, "1 to 8 limits"},
		{"zero requests", func(c *Spec) { c.Limits[0].Requests = 0 }, "limits[0].requests: must be at least 1"},
		{"sub-ms period", func(c *Spec) { c.Limits[0].Period = time.Microsecond }, "limits[0].period: must be at least 1ms"},
		{"no ttl", func(c *Spec) { c.TTL = 0 }, "ttl"},
		{"no state key", func(c *Spec) { c.StateKey = "" }, "keyLayout.state: a state key template is required"},
		{"bad template", func(c *Spec) { c.StateKey = "{rl:${user}}" }, "user"},
		{"two limits without ${limit}", func(c *Spec) {
			c.Limits = append(c.Limits, Limit{Name: "b", Requests: 2, Period: time.Second})
			c.StateKey = "{rl:${identity}}"
		}, "must use ${limit}"},
		{"multi-key without tag", func(c *Spec) {
			c.Limits = append(c.Limits, Limit{Name: "b", Requests: 2, Period: time.Second})
			c.Algorithm, c.StateKey = SlidingWindow, "rl:${identity}:${limit}"
		}, "no hash tag"},
		{"identity runs into text", func(c *Spec) { c.StateKey = "{rl:${identity}x}:${limit}" }, "must be followed by"},
		{"idempotency without ${requestId}", func(c *Spec) {
			c.IdempotencyKey, c.IdempotencyTTL = "{rl:${namespace}/${policy}:${identity}}:idem", time.Minute
		}, "must use ${requestId}"},
		{"idempotency on another tag", func(c *Spec) {
			c.IdempotencyKey, c.IdempotencyTTL = "{idem:${identity}}:${requestId}", time.Minute
		}, "keyLayout.idempotency"},
		{"idempotency without ttl", func(c *Spec) {
			c.IdempotencyKey = "{rl:${namespace}/${policy}:${identity}}:${requestId}"
		}, "idempotency.ttl"},
		{"ttl below the horizon", func(c *Spec) { c.Limits[0].Period = time.Hour }, "shorter than the TokenBucket horizon 1h0m0s"},
		{"faster than one per microsecond", func(c *Spec) {
			c.Algorithm, c.Limits[0].Requests, c.Limits[0].Period = GCRA, 2000, time.Millisecond
		}, "more than one request per microsecond"},
		{"LocalCap without cap", func(c *Spec) { c.FailureMode = LocalCap }, "LocalCap needs"},
		// Two limits of one name would share one key (and one line of every report).
		{"duplicate limit names", func(c *Spec) {
			c.Limits = append(c.Limits, Limit{Name: "a", Requests: 2, Period: time.Minute})
			c.TTL = time.Hour
		}, `limits[1].name: "a" is also the name of limits[0]`},
		// A tag made only of values that may be empty expands to {} for the Shared identity:
		// Redis then hashes whole keys, and the two limits' keys land on different slots.
		{"tag of untrusted values only", func(c *Spec) {
			c.Limits = append(c.Limits, Limit{Name: "b", Requests: 2, Period: time.Second})
			c.StateKey = "{${identity}}:${limit}"
		}, "keyLayout.state: \"{${identity}}:${limit}\" has a hash tag {${identity}} that expands to the empty tag {} when ${identity} is empty"},
		{"single-key tag of untrusted values only", func(c *Spec) {
			c.StateKey = "{${identity}}:${limit}"
		}, "empty tag"},
		// T in whole µs: rounding 1.43µs to 1µs ran 700000/s at 1000000/s; rounding up to 2µs
		// would run it at 500000/s. Both are refused: the limit cannot be represented.
		{"rate not representable in whole µs (700000/s)", func(c *Spec) {
			c.Limits[0].Requests, c.Limits[0].Period = 700_000, time.Second
		}, "limits[0].requests: 700000 per 1s needs 1.429µs per request"},
		{"rate not representable in whole µs (450000/s, GCRA)", func(c *Spec) {
			c.Algorithm, c.Limits[0].Requests, c.Limits[0].Period = GCRA, 450_000, time.Second
		}, "would admit at most 333333 per 1s"},
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

// TestIntervalNeverAdmitsMore: T, the whole µs one request occupies, is never shorter than the
// exact period/requests, so rounding can only ever admit fewer requests; NewPolicy accepts a
// rate only when it runs within 1% of what was asked.
func TestIntervalNeverAdmitsMore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		l := Limit{Name: "l", Requests: 1 + rng.Int64N(2_000_000), Period: time.Duration(1+rng.Int64N(10_000_000)) * time.Microsecond}
		T := interval(l)
		if T*l.Requests < l.Period.Microseconds() {
			t.Fatalf("%d per %s: T = %dµs admits %d per period", l.Requests, l.Period, T, l.Period.Microseconds()/T)
		}
		_, err := NewPolicy(Spec{Namespace: "ns", Name: "p", Algorithm: GCRA, Limits: []Limit{l},
			StateKey: "{rl:${identity}}", TTL: 1 << 62, FailureMode: FailOpen})
		effective := float64(l.Period.Microseconds()) / float64(T)
		ok := effective >= 0.99*float64(l.Requests) && l.Requests <= l.Period.Microseconds() && l.Period >= time.Millisecond
		if ok != (err == nil) {
			t.Fatalf("%d per %s runs at %.1f per period: NewPolicy error %v", l.Requests, l.Period, effective, err)
		}
	}
}
