package usageapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// routes is the Redises of a manager whose namespaces are served as the map says: the
// namespace to the name of its Redis, the name to its client (replaced by a test, as a
// RedisBackend edit replaces it).
type routes struct {
	serving map[string]string
	clients map[string]redis.UniversalClient
}

func (r *routes) ClientFor(_ context.Context, ns string) (string, redis.UniversalClient, error) {
	name, ok := r.serving[ns]
	if !ok {
		return "", nil, errors.New("not connected")
	}
	return name, r.clients[name], nil
}

// TestLimitersPerRedis: each namespace's counters are read and changed on the Redis that
// serves it, through one limiter per Redis, built again when that Redis's client is
// replaced; a namespace whose Redis is not reached is an error, not the default Redis.
func TestLimitersPerRedis(t *testing.T) {
	a, b := redistest.StartServer(t), redistest.StartServer(t)
	r := &routes{serving: map[string]string{"shop": "", "bank": "isolated"},
		clients: map[string]redis.UniversalClient{"": a.Client(), "isolated": b.Client()}}
	lims := NewLimiters(r, limiter.Options{Timeout: 2 * time.Second})
	t.Cleanup(lims.Close)
	ctx := t.Context()
	shop, err := lims.forNamespace(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	bank, err := lims.forNamespace(ctx, "bank")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := lims.forNamespace(ctx, "shop"); again != shop || bank == shop {
		t.Fatal("one limiter per Redis, kept while its client is")
	}
	for ns, l := range map[string]*limiter.Limiter{"shop": shop, "bank": bank} {
		if d := l.Check(ctx, testPolicy(t, ns), limiter.Request{Identity: "alice"}); d.Source != limiter.SourceRedis {
			t.Fatalf("a check of %s: %+v", ns, d)
		}
	}
	for s, want := range map[*redistest.Server]string{a: "shop", b: "bank"} {
		keys, err := s.Client().Keys(ctx, "*").Result()
		if err != nil || len(keys) != 1 || keys[0] != fmt.Sprintf("{rl:%s/api:alice}:per-second", want) {
			t.Errorf("%s holds %v (%v); want only %s's key", s.Addr(), keys, err, want)
		}
	}
	r.clients["isolated"] = b.Client() // the backend's connection rebuilt
	if rebuilt, err := lims.forNamespace(ctx, "bank"); err != nil || rebuilt == bank {
		t.Errorf("a replaced client kept its limiter (err %v)", err)
	}
	if _, err := lims.forNamespace(ctx, "nowhere"); err == nil {
		t.Error("a namespace whose Redis is not reached got a limiter")
	}
}

// testPolicy is a token bucket of namespace ns, per identity, on the default key layout.
func testPolicy(t *testing.T, ns string) *limiter.Policy {
	t.Helper()
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: ns, Name: "api", Algorithm: limiter.TokenBucket,
		Limits:   []limiter.Limit{{Name: "per-second", Requests: 10, Period: time.Second}},
		StateKey: "{rl:${namespace}/${policy}:${identity}}:${limit}", TTL: time.Minute, FailureMode: limiter.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
