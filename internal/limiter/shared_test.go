package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

// TestSharedChecksDecideAsAlone: for every algorithm, on one fake clock, random batches of
// checks (several identities, repeated ones among them, idempotent and not, costs past the
// limit) go once through the shared script, one call for the batch, and once through the check
// script, one call each, in the same order, on keys of their own. Every reply and every state
// must be the same: a shared call is the checks run one after another. A check of a shape the
// check script refuses gets the same error in its place, and the others still run.
func TestSharedChecksDecideAsAlone(t *testing.T) {
	_, rdb := standalone(t)
	ctx := context.Background()
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			limits := []Limit{{Name: "a", Requests: 6, Period: time.Second}, {Name: "b", Requests: 20, Period: time.Minute, Burst: 15}}
			p := newPolicy(t, alg, FailOpen, limits...)
			shared, alone := withFakeClock(p.script.shared), withFakeClock(p.script)
			clock := &fakeClockRunner{rdb: rdb}
			rng := rand.New(rand.NewPCG(uint64(len(alg)), 39))
			now := int64(1_800_000_000_000_000)
			for round := range 40 {
				now += rng.Int64N(400_000)
				clock.setNow(t, now)
				var members []*call
				for j := range 1 + rng.IntN(12) {
					id, req := fmt.Sprint("id-", rng.IntN(4)), ""
					if rng.IntN(3) == 0 {
						req = fmt.Sprint("req-", rng.IntN(3))
					}
					r := Request{Identity: id, Cost: int64(1 + rng.IntN(8)), RequestID: req, Fingerprint: "f"}
					c := &call{keys: p.Keys(id, req), args: p.Args(r)}
					if j == 2 && round%5 == 0 {
						c.keys = append(c.keys, "{extra}") // a shape the check refuses: a key too many
					}
					members = append(members, c)
				}
				compareShared(t, rdb, shared, alone, p.script.shared, members, round)
			}
			for id := range 4 {
				for _, k := range p.Keys(fmt.Sprint("id-", id), "") {
					s, _ := rdb.Get(ctx, "s:"+k).Result()
					a, _ := rdb.Get(ctx, "a:"+k).Result()
					if s != a {
						t.Fatalf("%s: shared state %q, alone %q", k, s, a)
					}
				}
			}
		})
	}
	if s := scripts.For(scripts.Checks, scripts.Bucket); s == nil || !strings.HasPrefix(s.Name, "checks_") {
		t.Fatal("no shared check script in the catalogue")
	}
}

// compareShared runs members once as one call of the shared script (its source shared), on
// keys prefixed "s:", and once each as the check script alone (alone), on keys prefixed
// "a:", and requires every reply the same.
func compareShared(t *testing.T, rdb redis.UniversalClient, shared, alone string, s *Script, members []*call, round int) {
	t.Helper()
	ctx := context.Background()
	sc := sharedCall(s, members)
	got, err := rdb.Eval(ctx, shared, prefixed("s:", sc.keys), sc.args...).Result()
	if err != nil {
		t.Fatalf("round %d: the shared call: %v", round, err)
	}
	replies, _ := got.([]any)
	if len(replies) != len(members) {
		t.Fatalf("round %d: %d replies for %d checks", round, len(replies), len(members))
	}
	for j, c := range members {
		want, err := rdb.Eval(ctx, alone, prefixed("a:", c.keys), c.args...).Result()
		w := want
		if err != nil {
			w = err.Error()
		}
		g := replies[j]
		if e, ok := g.(error); ok {
			g = e.Error()
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("round %d, check %d: shared %v, alone %v", round, j, g, w)
		}
	}
}

// prefixed is keys each with prefix, so the two sides keep keys of their own.
func prefixed(prefix string, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = prefix + k
	}
	return out
}

// TestPipelineSharesChecks: with pipelining on a standalone Redis, concurrent checks go as
// shared calls (fewer script calls than checks), and every decision is still exact: 64
// goroutines, 40 checks each, on one identity of a limit of 500 that cannot refill: 500
// admitted, to the unit.
func TestPipelineSharesChecks(t *testing.T) {
	srv, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{Pipelining: true, Workers: 2})
	for _, alg := range algorithms {
		p := newPolicy(t, alg, FailClosed, Limit{Name: "budget", Requests: 500, Period: 1000 * time.Hour})
		before := scriptCalls(t, srv.Client())
		admitted := make(chan bool, 64*40)
		done := make(chan struct{})
		for range 64 {
			go func() {
				defer func() { done <- struct{}{} }()
				for range 40 {
					d := l.Check(context.Background(), p, Request{Identity: "team"})
					if d.WithoutRedis() {
						t.Errorf("%s: a check fell to the failure mode: %v", alg, d.Err)
					}
					admitted <- d.Allowed
				}
			}()
		}
		for range 64 {
			<-done
		}
		close(admitted)
		n := 0
		for a := range admitted {
			if a {
				n++
			}
		}
		calls := scriptCalls(t, srv.Client()) - before
		t.Logf("%s: %d admitted of 2560 checks, in %d script calls", alg, n, calls)
		if n != 500 || calls >= 64*40 {
			t.Fatalf("%s: %d admitted (want 500) in %d script calls (want fewer than 2560 checks)", alg, n, calls)
		}
	}
}
