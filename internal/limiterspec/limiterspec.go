// Package limiterspec turns a published snapshot entry into what the limiter runs: the one
// place the document meets the runtime. Every sidecar compiles the entries it receives with
// it, and the controller and the webhook compile the entries they publish with it, so what
// was checked is what runs. The snapshot package itself knows nothing of the limiter.
package limiterspec

import (
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Of is the limiter's Spec of entry e of namespace: durations from milliseconds, a missing
// replay bound (a document written before the field) as the limiter's default.
func Of(namespace string, e snapshot.Entry) limiter.Spec {
	c := limiter.Spec{
		Namespace: namespace, Name: e.Name, Algorithm: limiter.Algorithm(e.Algorithm),
		StateKey: e.StateKey, IdempotencyKey: e.IdempotencyKey, TTL: ms(e.TTLMs),
		FailureMode: limiter.FailureMode(e.FailureMode), Leases: e.Leases, Shards: int(e.Shards),
	}
	for _, l := range e.Limits {
		c.Limits = append(c.Limits, limiter.Limit{Name: l.Name, Requests: l.Requests, Period: ms(l.PeriodMs), Burst: l.Burst})
	}
	if id := e.Idempotency; id != nil {
		c.IdempotencyTTL = ms(id.TTLMs)
		c.IdempotencyMaxReplays = limiter.DefaultMaxReplays
		if id.MaxReplays != 0 {
			c.IdempotencyMaxReplays = int(id.MaxReplays)
		}
	}
	if lc := e.LocalCap; lc != nil {
		c.LocalCap = &limiter.LocalCapConfig{Requests: lc.Requests, Period: ms(lc.PeriodMs), MaxIdentities: int(lc.MaxIdentities)}
	}
	return c
}

// Compile is the limiter's policy of entry e of namespace; functions calls its scripts as
// the Redis functions the manager loaded (snapshot.Redis.Functions).
func Compile(namespace string, e snapshot.Entry, functions bool) (*limiter.Policy, error) {
	c := Of(namespace, e)
	c.Functions = functions
	return limiter.NewPolicy(c)
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
