package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
)

// peekLimits are two limits per algorithm whose state cannot move by itself while a test
// runs: 1,000 hours per period, so a token refills every 36,000 s (TokenBucket, GCRA) and no
// window ends (FixedWindow, SlidingWindow) but with a chance of a few in a million.
func peekLimits() []Limit {
	return []Limit{
		{Name: "small", Requests: 7, Period: 1000 * time.Hour},
		{Name: "large", Requests: 30, Period: 1000 * time.Hour},
	}
}

// TestPeekAgreesWithTheNextCheck: for every algorithm, random costs (1 to 4) checked one
// after another against limits of 40 and 45, each preceded by a peek of the same cost, until
// well past exhaustion, where small costs still fit and large ones do not: the peek's decision is the check's,
// what it reports remaining is what the check leaves plus the cost (when admitted) or what
// the check reports (when denied), and a peek of cost 0 after the check reports each
// limit's remaining as the check left it.
func TestPeekAgreesWithTheNextCheck(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		ctx := context.Background()
		p := newPolicy(t, alg, FailClosed, Limit{Name: "small", Requests: 40, Period: 1000 * time.Hour},
			Limit{Name: "large", Requests: 45, Period: 1000 * time.Hour})
		rng := rand.New(rand.NewPCG(1, uint64(len(alg))))
		admitted, denied := 0, 0
		for i := range 60 {
			r := Request{Identity: "alice", Cost: 1 + rng.Int64N(4)}
			pk := l.Peek(ctx, p, r)
			d := mustCheck(t, l, p, r)
			if pk.Source != SourceRedis || pk.Allowed != d.Allowed {
				t.Fatalf("step %d, cost %d: peek %+v, then check %+v", i, r.Cost, pk.Decision, d)
			}
			if d.Allowed {
				admitted++
				if got := pk.Limits[indexOf(p, d.LimitName)].Remaining; got != d.Remaining+r.Cost {
					t.Fatalf("step %d: peek said %d remain on %s; the check admitting %d left %d", i, got, d.LimitName, r.Cost, d.Remaining)
				}
			} else {
				denied++
				// The check ran a moment after the peek: its wait may be shorter by that.
				if lag := pk.RetryAfter - d.RetryAfter; pk.DeniedBy != d.DeniedBy || pk.Remaining != d.Remaining ||
					lag < 0 || lag > 50*time.Millisecond {
					t.Fatalf("step %d: peek denied by %s (%d left, retry %s); check by %s (%d left, retry %s)", i,
						pk.DeniedBy, pk.Remaining, pk.RetryAfter, d.DeniedBy, d.Remaining, d.RetryAfter)
				}
			}
			after := l.Peek(ctx, p, Request{Identity: "alice"})
			if !after.Allowed {
				t.Fatalf("step %d: a peek of cost 0 was denied: %+v", i, after.Decision)
			}
			if d.Allowed && after.Limits[indexOf(p, d.LimitName)].Remaining != d.Remaining {
				t.Fatalf("step %d: after the check left %d on %s, a read says %+v", i, d.Remaining, d.LimitName, after.Limits)
			}
		}
		if admitted == 0 || denied == 0 {
			t.Fatalf("%d admitted, %d denied: the test proves little without both", admitted, denied)
		}
		t.Logf("%d admitted and %d denied, every peek agreeing", admitted, denied)
	})
}

// TestPeekReadsUsage: a read (cost 0) of a fresh identity finds every limit full; after 5
// requests, 5 used of each; after a denial, the same.
func TestPeekReadsUsage(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		ctx := context.Background()
		p := newPolicy(t, alg, FailClosed, peekLimits()...)
		usage := func() []int64 {
			pk := l.Peek(ctx, p, Request{Identity: "bob"})
			if pk.Source != SourceRedis || len(pk.Limits) != 2 {
				t.Fatalf("read: %+v", pk)
			}
			return []int64{pk.Limits[0].Used(), pk.Limits[1].Used()}
		}
		if got := usage(); !reflect.DeepEqual(got, []int64{0, 0}) {
			t.Fatalf("fresh identity: used %v, want [0 0]", got)
		}
		for range 5 {
			mustCheck(t, l, p, Request{Identity: "bob"})
		}
		if got := usage(); !reflect.DeepEqual(got, []int64{5, 5}) {
			t.Fatalf("after 5 requests: used %v, want [5 5]", got)
		}
		if d := mustCheck(t, l, p, Request{Identity: "bob", Cost: 3}); d.Allowed || d.DeniedBy != "small" {
			t.Fatalf("a cost of 3 with 2 left on small: %+v", d)
		}
		if got := usage(); !reflect.DeepEqual(got, []int64{5, 5}) {
			t.Fatalf("after a denial: used %v, want [5 5]", got)
		}
		pk := l.Peek(ctx, p, Request{Identity: "bob", Cost: 3})
		if pk.Allowed || pk.DeniedBy != "small" || pk.RetryAfter <= 0 || pk.Limits[1].RetryAfter != 0 {
			t.Fatalf("peek of cost 3: %+v", pk)
		}
	})
}

// TestTenThousandPeeksLeaveRedisAsItWas: state written by checks of every algorithm (with
// keep-usage values, an idempotency record and a calendar window among them) is dumped
// (DUMP, PEXPIRETIME of every key) before and after 10,000 peeks of random costs: the two
// dumps are identical, and no key was added.
func TestTenThousandPeeksLeaveRedisAsItWas(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := context.Background()
	l := newLimiter(t, rdb, Options{})
	var policies []*Policy
	for _, alg := range algorithms {
		policies = append(policies, newPolicy(t, alg, FailClosed, peekLimits()...))
		if alg == TokenBucket || alg == GCRA {
			p := newPolicy(t, alg, FailClosed, peekLimits()...)
			kept, err := NewPolicy(withKeep(p.Spec))
			if err != nil {
				t.Fatal(err)
			}
			policies = append(policies, kept)
		}
	}
	policies = append(policies, monthlyPolicy(t))
	ids := []string{"a", "b", "c"}
	for _, p := range policies {
		for i, id := range ids {
			for range 3 * (i + 1) {
				mustCheck(t, l, p, Request{Identity: id, RequestID: fmt.Sprint(id, i)})
			}
		}
	}
	before := dumpAll(t, srv.Client())
	rng := rand.New(rand.NewPCG(2, 3))
	for range 10000 {
		p := policies[rng.IntN(len(policies))]
		id := append(ids, "never-seen")[rng.IntN(len(ids)+1)]
		if pk := l.Peek(ctx, p, Request{Identity: id, Cost: rng.Int64N(40)}); pk.Source != SourceRedis {
			t.Fatalf("peek of %s: %+v", p.Name, pk)
		}
	}
	after := dumpAll(t, srv.Client())
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("10,000 peeks changed Redis: %d keys before, %d after", len(before), len(after))
	}
	t.Logf("%d keys of %d policies byte-identical after 10,000 peeks", len(before), len(policies))
}

// withKeep is c with keep-usage on.
func withKeep(c Spec) Spec {
	c.KeepUsage = true
	c.Name += "-keep"
	return c
}

// monthlyPolicy is a FixedWindow policy of 50 per calendar month in Europe/Berlin.
func monthlyPolicy(t testing.TB) *Policy {
	t.Helper()
	p := newPolicy(t, FixedWindow, FailClosed, perHour("hourly", 40))
	c := p.Spec
	c.Name += "-month"
	month, err := calendar.New(calendar.Month, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	c.Limits = []Limit{{Name: "month", Requests: 50, Calendar: &month}}
	out, err := NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpAll is every key's DUMP and absolute expiry (PEXPIRETIME), by name.
func dumpAll(t testing.TB, c *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range scanAll(t, c) {
		v, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		at, err := c.Do(ctx, "PEXPIRETIME", k).Int64()
		if err != nil {
			t.Fatalf("PEXPIRETIME %s: %v", k, err)
		}
		out[k] = fmt.Sprintf("%x@%d", v, at)
	}
	return out
}

// TestPeekUnderConcurrentDebits: 8 goroutines debit a limit of 100 (cost 1) while 2 others
// peek it: exactly 100 are admitted (the peeks debited nothing), and the remaining each
// peeker reads never rises and stays within [0, 100].
func TestPeekUnderConcurrentDebits(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		ctx := context.Background()
		p := newPolicy(t, alg, FailClosed, Limit{Name: "l", Requests: 100, Period: 1000 * time.Hour})
		var admitted atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, 2)
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				last := int64(101)
				for peeks := 0; ; peeks++ {
					select {
					case <-stop:
						return
					default:
					}
					pk := l.Peek(ctx, p, Request{Identity: "hot", Cost: 1})
					if rem := pk.Limits[0].Remaining; pk.Source != SourceRedis || rem > last || rem < 0 || rem > 100 {
						errs <- fmt.Errorf("peek %d read %d remaining after %d: %w", peeks, rem, last, pk.Err)
						return
					} else {
						last = rem
					}
				}
			}()
		}
		var debit sync.WaitGroup
		for range 8 {
			debit.Add(1)
			go func() {
				defer debit.Done()
				for range 25 {
					if d := l.Check(ctx, p, Request{Identity: "hot"}); d.Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
		debit.Wait()
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := admitted.Load(); got != 100 {
			t.Fatalf("%d of 200 admitted by a limit of 100 while peeked; want exactly 100", got)
		}
		if pk := l.Peek(ctx, p, Request{Identity: "hot", Cost: 1}); pk.Allowed || pk.Limits[0].Remaining != 0 {
			t.Fatalf("after 100 admitted: %+v", pk)
		}
	})
}

// TestPeekTakesNoLease: with leases on, peeks of a hot identity create no key at all (no
// lease record, no state): checks after them (by a limiter without leases, which strand no
// units) find the whole limit.
func TestPeekTakesNoLease(t *testing.T) {
	_, rdb := standalone(t)
	ctx := context.Background()
	l := newLimiter(t, rdb, Options{Leases: LeaseOptions{HotRate: 1, Span: time.Second}})
	plain := newLimiter(t, rdb, Options{})
	for _, alg := range algorithms {
		c := newPolicy(t, alg, FailClosed, Limit{Name: "l", Requests: 50, Period: 1000 * time.Hour}).Spec
		c.Leases = true
		p, err := NewPolicy(c)
		if err != nil {
			t.Fatal(err)
		}
		for range 500 {
			if pk := l.Peek(ctx, p, Request{Identity: "hot", Cost: 1}); !pk.Allowed || pk.Limits[0].Remaining != 50 {
				t.Fatalf("%s: peek of an untouched identity: %+v", alg, pk)
			}
		}
		if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("%s: 500 peeks left %d keys (%v); want none", alg, n, err)
		}
		admitted := 0
		for range 80 {
			if plain.Check(ctx, p, Request{Identity: "hot"}).Allowed {
				admitted++
			}
		}
		if admitted != 50 {
			t.Fatalf("%s: %d of 80 admitted after the peeks, want 50", alg, admitted)
		}
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPeekShardedPolicy: a limit of 30 over 3 shards reads whole: 30 remain at first, 20
// after 10 admitted, and once all 30 are spent a peek denies, as a check does. On standalone
// Redis for every algorithm, and on a 3-primary Cluster, where each shard has its primary.
func TestPeekShardedPolicy(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) { peekShards(t, l, alg) })
	t.Run("Cluster", func(t *testing.T) {
		c := startClusterT(t)
		l := newLimiter(t, c.Client(), Options{})
		for _, alg := range algorithms {
			t.Run(string(alg), func(t *testing.T) { peekShards(t, l, alg) })
		}
	})
}

// peekShards is TestPeekShardedPolicy on l for alg.
func peekShards(t *testing.T, l *Limiter, alg Algorithm) {
	ctx := context.Background()
	c := newPolicy(t, alg, FailClosed, Limit{Name: "l", Requests: 30, Period: 1000 * time.Hour}).Spec
	c.Shards = 3
	p, err := NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	read := func() Peek { return l.Peek(ctx, p, Request{Identity: "global", Cost: 1}) }
	if pk := read(); !pk.Allowed || pk.Limits[0].Remaining != 30 || pk.Limits[0].Limit != 30 {
		t.Fatalf("fresh: %+v", pk)
	}
	for range 10 {
		mustCheck(t, l, p, Request{Identity: "global"})
	}
	if pk := read(); !pk.Allowed || pk.Limits[0].Remaining != 20 {
		t.Fatalf("after 10: %+v", pk)
	}
	for range 20 {
		if d := mustCheck(t, l, p, Request{Identity: "global"}); !d.Allowed {
			t.Fatalf("denied before 30: %+v", d)
		}
	}
	pk := read()
	d := l.Check(ctx, p, Request{Identity: "global"})
	if pk.Allowed || d.Allowed || pk.Limits[0].Remaining != 0 || pk.RetryAfter <= 0 {
		t.Fatalf("after 30: peek %+v, check %+v", pk, d)
	}
}

// TestPeekWithoutRedis: with Redis gone, a peek is the failure mode's answer and counts
// nothing: FailClosed denies; LocalCap (3 per hour) answers from the in-process cap without
// taking from it, so three checks still pass after any number of peeks.
func TestPeekWithoutRedis(t *testing.T) {
	srv, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{Timeout: 200 * time.Millisecond})
	closed := newPolicy(t, TokenBucket, FailClosed, perHour("l", 10))
	capped := newPolicy(t, TokenBucket, LocalCap, perHour("l", 10))
	srv.Kill()
	ctx := context.Background()
	if pk := l.Peek(ctx, closed, Request{Identity: "x", Cost: 1}); pk.Allowed || pk.Source != SourceFailClosed || pk.Err == nil {
		t.Fatalf("FailClosed peek without Redis: %+v", pk)
	}
	for range 10 {
		if pk := l.Peek(ctx, capped, Request{Identity: "x", Cost: 1}); !pk.Allowed || pk.Source != SourceLocalCap || pk.Remaining != 3 {
			t.Fatalf("LocalCap peek without Redis: %+v", pk)
		}
	}
	for i := range 3 {
		if d := l.Check(ctx, capped, Request{Identity: "x"}); !d.Allowed || d.Source != SourceLocalCap {
			t.Fatalf("check %d under LocalCap after peeks: %+v", i, d)
		}
	}
	pk := l.Peek(ctx, capped, Request{Identity: "x", Cost: 1})
	if pk.Allowed || pk.Remaining != 0 || pk.RetryAfter <= 0 || pk.Err == nil {
		t.Fatalf("LocalCap peek after 3 checks: %+v", pk)
	}
}
