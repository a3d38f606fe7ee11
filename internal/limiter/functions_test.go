package limiter

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// loadLibraries loads every script as its function library, as the manager does.
func loadLibraries(t testing.TB, rdb redis.UniversalClient) {
	t.Helper()
	for _, s := range AllScripts() {
		if err := rdb.FunctionLoadReplace(context.Background(), s.Library()).Err(); err != nil {
			t.Fatalf("FUNCTION LOAD %s: %v", s.Name, err)
		}
	}
}

// functionsPolicy is p calling its scripts as functions (Spec.Functions), under a name of
// its own (so on keys of its own).
func functionsPolicy(t testing.TB, p *Policy) *Policy {
	t.Helper()
	c := p.Spec
	c.Name += "-functions"
	c.Functions = true
	q, err := NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return q
}

// TestFunctionsDecideAsScripts: a policy calling its script as a Redis function (FCALL, as
// sidecars of per-namespace users do) decides exactly as with EVALSHA, for every algorithm,
// with two limits, weights, idempotent replays and denials, with and without pipelining:
// the same body runs either way. Peeks (their own functions) read the same usage.
func TestFunctionsDecideAsScripts(t *testing.T) {
	_, rdb := standalone(t)
	loadLibraries(t, rdb)
	for _, pipelining := range []bool{false, true} {
		l := newLimiter(t, rdb, Options{Pipelining: pipelining})
		for _, alg := range algorithms {
			byScript := newPolicy(t, alg, FailClosed, perHour("hour", 5), Limit{Name: "day", Requests: 7, Period: 24 * time.Hour})
			byFunction := functionsPolicy(t, byScript)
			for i, r := range []Request{{Cost: 2}, {RequestID: "a"}, {RequestID: "a"}, {Cost: 3}, {}, {Cost: 9}} {
				r.Identity = "caller"
				a, b := mustCheck(t, l, byScript, r), mustCheck(t, l, byFunction, r)
				if a.Allowed != b.Allowed || a.Remaining != b.Remaining || a.Replayed != b.Replayed || a.LimitName != b.LimitName {
					t.Errorf("%s pipelining=%v check %d: EVALSHA %+v, FCALL %+v", alg, pipelining, i, a, b)
				}
				pa, pb := l.Peek(context.Background(), byScript, r), l.Peek(context.Background(), byFunction, r)
				if pa.Source != SourceRedis || pb.Source != SourceRedis || !reflect.DeepEqual(usedOf(pa), usedOf(pb)) || pa.Allowed != pb.Allowed {
					t.Errorf("%s pipelining=%v peek %d: EVALSHA %+v, FCALL %+v", alg, pipelining, i, pa, pb)
				}
			}
		}
	}
}

// usedOf is what a peek read as used of each limit.
func usedOf(p Peek) []int64 {
	out := make([]int64, len(p.Limits))
	for i, s := range p.Limits {
		out[i] = s.Used()
	}
	return out
}

// TestMissingFunctionIsTheFailureModesNeverEval: a function the manager has not loaded (a
// restart without persistence, before its next round) is answered by the policy's failure
// mode, and the limiter never falls back to EVAL: a namespace's user may not run it, and
// must not need to.
func TestMissingFunctionIsTheFailureModesNeverEval(t *testing.T) {
	srv, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	p := functionsPolicy(t, newPolicy(t, TokenBucket, FailClosed, perHour("hour", 5)))
	d := l.Check(context.Background(), p, Request{Identity: "caller"})
	if d.Source != SourceFailClosed || d.Err == nil || !strings.Contains(d.Err.Error(), "Function not found") {
		t.Fatalf("check without the function loaded: %+v; want FailClosed with the missing function named", d)
	}
	stats, err := srv.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_eval:") || strings.Contains(stats, "cmdstat_evalsha:") {
		t.Fatalf("the limiter sent EVAL or EVALSHA for a function policy:\n%s", stats)
	}
	loadLibraries(t, rdb)
	if d := mustCheck(t, l, p, Request{Identity: "caller"}); !d.Allowed {
		t.Fatalf("check once the function is loaded: %+v", d)
	}
}
