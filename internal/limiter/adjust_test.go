package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// windows reports whether alg counts in windows, which hold a grant beyond the limit.
func windows(alg Algorithm) bool { return alg == FixedWindow || alg == SlidingWindow }

// adjustID numbers adjustments' request ids in tests.
var adjustID atomic.Int64

// mustAdjust adjusts identity's counters of p with a fresh request id.
func mustAdjust(t testing.TB, l *Limiter, p *Policy, identity string, op Op, amount int64) Adjusted {
	t.Helper()
	out, err := l.Adjust(context.Background(), p, Adjustment{Op: op, Identity: identity, Amount: amount,
		RequestID: fmt.Sprintf("req-%d", adjustID.Add(1))})
	if err != nil {
		t.Fatalf("%s %d: %v", op, amount, err)
	}
	return out
}

// admits runs n checks of cost 1 one after another and counts the admitted.
func admits(t testing.TB, l *Limiter, p *Policy, identity string, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if mustCheck(t, l, p, Request{Identity: identity}).Allowed {
			ok++
		}
	}
	return ok
}

// remaining is what a peek reports each limit of p holds for identity.
func remaining(t testing.TB, l *Limiter, p *Policy, identity string) []int64 {
	t.Helper()
	pk := l.Peek(context.Background(), p, Request{Identity: identity})
	if pk.Source != SourceRedis {
		t.Fatalf("peek from %s: %v", pk.Source, pk.Err)
	}
	out := make([]int64, len(pk.Limits))
	for i, s := range pk.Limits {
		out[i] = s.Remaining
	}
	return out
}

// TestAdjustExactEffect: for every algorithm, limits of 7 and 30 that cannot refill while
// the test runs. 7 spent; a refund of 3 frees 3 on each limit and exactly 3 more are
// admitted; a refund of 100 frees what is used and no more (7, then 7 admitted); a reset
// frees everything; with 2 used, a grant of 5 gives 5 beyond the limit (10 admitted); a
// reset after a grant takes it back.
func TestAdjustExactEffect(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		p := newPolicy(t, alg, FailClosed, peekLimits()...)
		wantAdmits(t, l, p, 10, 7, "against 7")
		wantChange(t, mustAdjust(t, l, p, "alice", OpRefund, 3), "refund 3", change{3, 3}, change{26, 3})
		wantAdmits(t, l, p, 5, 3, "after a refund of 3")
		// Denials debit nothing: each limit used 7.
		wantChange(t, mustAdjust(t, l, p, "alice", OpRefund, 100), "refund 100", change{7, 7}, change{30, 7})
		wantAdmits(t, l, p, 9, 7, "after a refund of everything")
		wantChange(t, mustAdjust(t, l, p, "alice", OpReset, 0), "reset", change{7, 7}, change{30, 7})
		wantAdmits(t, l, p, 2, 2, "after a reset")
		// 2 used: a grant of 5 gives 5 beyond what is left (the windows count below 0, the
		// buckets hold a credit beyond their burst).
		wantChange(t, mustAdjust(t, l, p, "alice", OpGrant, 5), "grant 5 with 2 used", change{10, 5}, change{33, 5})
		wantAdmits(t, l, p, 15, 10, "after a grant of 5 with 2 used")
		mustAdjust(t, l, p, "alice", OpGrant, 50)
		mustAdjust(t, l, p, "alice", OpReset, 0)
		if got := remaining(t, l, p, "alice"); got[0] != 7 || got[1] != 30 {
			t.Fatalf("after a grant and a reset: %v remaining, want 7 and 30: no grant left", got)
		}
		wantAdmits(t, l, p, 9, 7, "after a grant and a reset")
	})
}

// change is what an adjustment should leave on one limit.
type change struct{ remaining, applied int64 }

// wantChange requires out to report want for each limit, in order.
func wantChange(t *testing.T, out Adjusted, what string, want ...change) {
	t.Helper()
	for i, w := range want {
		if c := out.Limits[i]; out.Replayed || c.Remaining != w.remaining || c.Applied != w.applied {
			t.Fatalf("%s: %+v; want on each limit (remaining, applied) %v", what, out, want)
		}
	}
}

// wantAdmits requires exactly want of n checks as alice to be admitted.
func wantAdmits(t *testing.T, l *Limiter, p *Policy, n, want int, what string) {
	t.Helper()
	if got := admits(t, l, p, "alice", n); got != want {
		t.Fatalf("%s: %d of %d admitted, want %d", what, got, n, want)
	}
}

// TestAdjustIdempotent: a grant retried under its request id applies once: the retry is
// answered with the first call's figures, marked replayed, and Redis is left as the first
// call left it; the same id for another amount or op is refused, changing nothing.
func TestAdjustIdempotent(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		ctx := context.Background()
		p := newPolicy(t, alg, FailClosed, peekLimits()...)
		admits(t, l, p, "bob", 7)
		a := Adjustment{Op: OpGrant, Identity: "bob", Amount: 5, RequestID: "ticket-1"}
		first, err := l.Adjust(ctx, p, a)
		if err != nil || first.Replayed || first.Limits[0].Remaining != 5 {
			t.Fatalf("grant 5 to an exhausted caller: %+v, %v", first, err)
		}
		after := remaining(t, l, p, "bob")
		for range 3 {
			again, err := l.Adjust(ctx, p, a)
			if err != nil || !again.Replayed || !reflect.DeepEqual(again.Limits, first.Limits) {
				t.Fatalf("retry: %+v, %v; want the first figures %+v, replayed", again, err, first.Limits)
			}
		}
		for _, other := range []Adjustment{{Op: OpGrant, Identity: "bob", Amount: 6, RequestID: "ticket-1"},
			{Op: OpRefund, Identity: "bob", Amount: 5, RequestID: "ticket-1"}} {
			if _, err := l.Adjust(ctx, p, other); !errors.Is(err, ErrAdjustReused) {
				t.Fatalf("%s %d under the grant's id: %v; want ErrAdjustReused", other.Op, other.Amount, err)
			}
		}
		if got := remaining(t, l, p, "bob"); !reflect.DeepEqual(got, after) {
			t.Fatalf("after retries: %v remaining; the first grant left %v", got, after)
		}
		if got := admits(t, l, p, "bob", 8); got != 5 {
			t.Fatalf("after a grant of 5 retried 3 times: %d of 8 admitted, want 5", got)
		}
	})
}

// TestAdjustUnderConcurrentBurst: 8 callers hammer an exhausted limit of 20 while a refund,
// then on a fresh policy a grant, of 5 lands in the middle of the burst; each keeps checking
// for 10 more after it. Exactly 5 are admitted each time: the change's units and not one
// more, whatever interleaving.
func TestAdjustUnderConcurrentBurst(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		for _, op := range []Op{OpRefund, OpGrant} {
			p := newPolicy(t, alg, FailClosed, Limit{Name: "burst", Requests: 20, Period: 1000 * time.Hour})
			if got := admits(t, l, p, "carol", 20); got != 20 {
				t.Fatalf("%d of 20 admitted", got)
			}
			got, out := burstDuring(t, l, p, op)
			if got != 5 || out.Limits[0].Applied != 5 {
				t.Fatalf("%s of 5 during a burst of 8 callers: %d admitted (applied %d), want exactly 5", op, got, out.Limits[0].Applied)
			}
		}
	})
}

// burstDuring has 8 callers check carol against p while op of 5 lands 20 ms in, each going
// on for 10 checks after it; it returns how many were admitted and the adjustment's answer.
func burstDuring(t *testing.T, l *Limiter, p *Policy, op Op) (int64, Adjusted) {
	t.Helper()
	var admitted atomic.Int64
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for after := 0; after < 10; {
				if done.Load() {
					after++
				}
				if l.Check(context.Background(), p, Request{Identity: "carol"}).Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	out := mustAdjust(t, l, p, "carol", op, 5)
	done.Store(true)
	wg.Wait()
	return admitted.Load(), out
}

// TestAdjustGrantEndsWithItsWindow: a grant on a window limit lasts until that window ends.
// 10 granted on a fresh caller of a limit of 3 per second and not used: the next window
// admits exactly 3 (for the sliding window, two windows later too), not 13.
func TestAdjustGrantEndsWithItsWindow(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			p := newPolicy(t, alg, FailClosed, Limit{Name: "second", Requests: 3, Period: time.Second})
			untilNextSecond(200 * time.Millisecond)
			if out := mustAdjust(t, l, p, "dave", OpGrant, 10); out.Limits[0].Remaining != 13 {
				t.Fatalf("grant of 10 on a fresh caller: %+v, want 13 remaining", out)
			}
			untilNextSecond(100 * time.Millisecond)
			if got := admits(t, l, p, "dave", 6); got != 3 {
				t.Fatalf("the window after a grant of 10: %d of 6 admitted, want 3", got)
			}
		})
	}
}

// TestAdjustBucketGrantEnds: a grant on a bucket is a credit that lasts the bucket's refill
// time (burst * T) from the grant. 10 granted to a fresh caller of 3 per second, unused: a
// second and a bit later the caller gets its 3 again, not 13. While the credit lasts the
// state is the 32-byte '>dddd' value; spent, it is the bucket's own again.
func TestAdjustBucketGrantEnds(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			p := newPolicy(t, alg, FailClosed, Limit{Name: "second", Requests: 3, Period: time.Second})
			if out := mustAdjust(t, l, p, "frank", OpGrant, 10); out.Limits[0].Remaining != 13 || out.Limits[0].Applied != 10 {
				t.Fatalf("grant of 10 on a fresh caller: %+v, want 13 remaining", out)
			}
			if v := rdb.Get(context.Background(), p.Keys("frank", "")[0]).Val(); len(v) != 32 {
				t.Fatalf("the state during a grant: %d bytes, want the 32-byte '>dddd' value", len(v))
			}
			time.Sleep(1200 * time.Millisecond)
			if got := admits(t, l, p, "frank", 6); got != 3 {
				t.Fatalf("after the grant's end: %d of 6 admitted, want 3", got)
			}
			mustAdjust(t, l, p, "gina", OpGrant, 2)
			admits(t, l, p, "gina", 3)
			if v := rdb.Get(context.Background(), p.Keys("gina", "")[0]).Val(); len(v) == 32 {
				t.Fatal("a spent credit must leave the bucket's own value")
			}
		})
	}
}

// untilNextSecond sleeps until margin past the next whole second of the clock, which Redis's
// windows of a second follow (the server runs on this machine).
func untilNextSecond(margin time.Duration) {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + margin).Sub(now))
}

// TestAdjustShardedPolicy: a limit of 30 over 3 shards, exhausted; a grant of 6 (FixedWindow)
// or a refund of 6 (TokenBucket) is spread as the limit is, 2 per shard, and exactly 6 more
// are admitted; a reset frees all 30.
func TestAdjustShardedPolicy(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	for _, c := range []struct {
		alg Algorithm
		op  Op
	}{{FixedWindow, OpGrant}, {TokenBucket, OpRefund}} {
		t.Run(string(c.alg), func(t *testing.T) {
			p := shardedPolicy(t, c.alg, 3, false, Limit{Name: "global", Requests: 30, Period: 1000 * time.Hour})
			if got := admits(t, l, p, "fixed", 40); got != 30 {
				t.Fatalf("%d of 40 admitted against 30", got)
			}
			out := mustAdjust(t, l, p, "fixed", c.op, 6)
			if s := out.Limits[0]; s.Applied != 6 || s.Remaining != 6 || s.Limit != 30 {
				t.Fatalf("%s 6 over 3 shards: %+v, want 6 applied and remaining of 30", c.op, out)
			}
			if got := admits(t, l, p, "fixed", 10); got != 6 {
				t.Fatalf("after %s 6: %d of 10 admitted, want 6", c.op, got)
			}
			if out := mustAdjust(t, l, p, "fixed", OpReset, 0); out.Limits[0].Remaining != 30 {
				t.Fatalf("reset over 3 shards: %+v, want 30 remaining", out)
			}
			if got := admits(t, l, p, "fixed", 40); got != 30 {
				t.Fatalf("after a reset: %d of 40 admitted, want 30", got)
			}
		})
	}
}

// TestAdjustFunctionsAndKeepUsage: the function flavour (FCALL, as per-namespace users call)
// adjusts as the script does, and a keep-usage policy's refund is written at its T ('>dd').
func TestAdjustFunctionsAndKeepUsage(t *testing.T) {
	_, rdb := standalone(t)
	loadLibraries(t, rdb)
	l := newLimiter(t, rdb, Options{})
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			p := functionsPolicy(t, keepPolicy(t, alg, 2000*time.Hour, Limit{Name: "kept", Requests: 10, Period: 1000 * time.Hour}))
			admits(t, l, p, "erin", 10)
			if out := mustAdjust(t, l, p, "erin", OpRefund, 4); out.Limits[0].Applied != 4 {
				t.Fatalf("refund 4 by FCALL: %+v", out)
			}
			v, err := rdb.Get(context.Background(), p.Keys("erin", "")[0]).Result()
			if err != nil || len(v) != 16 {
				t.Fatalf("the refunded state %q (%v): want a '>dd' value of 16 bytes", v, err)
			}
			if got := admits(t, l, p, "erin", 6); got != 4 {
				t.Fatalf("after a refund of 4: %d of 6 admitted, want 4", got)
			}
		})
	}
}

// TestLeaseReturnKeepsAGrant: a sidecar leased 5 of a window's 10 units, a grant of 10 came
// after, and the sidecar returns the 3 it did not spend. The return must not erase the grant
// (before, it clamped the count at 0: 10 remaining instead of 15); it gives back nothing
// while the count is at or below 0, so the caller has 15 (never more than the 18 an exact
// return would give).
func TestLeaseReturnKeepsAGrant(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	ctx := context.Background()
	p := newPolicy(t, FixedWindow, FailClosed, Limit{Name: "window", Requests: 10, Period: 1000 * time.Hour})
	state := p.Keys("lessee", "")[0]
	rec1, rec2 := state+":lease:1", state+":lease:2"
	lease := func(keys []string, head ...any) {
		t.Helper()
		if _, err := evalOne(ctx, rdb, p.leaseScript, keys, append(head, p.limitArg...)); err != nil {
			t.Fatalf("lease call %v: %v", head, err)
		}
	}
	lease([]string{state, rec1}, "5", p.ttlMS, "1", "-1", "1")
	if got := remaining(t, l, p, "lessee"); got[0] != 5 {
		t.Fatalf("after a lease of 5: %v remaining, want 5", got)
	}
	mustAdjust(t, l, p, "lessee", OpGrant, 10)
	lease([]string{state, rec2, rec1}, "0", p.ttlMS, "1", "2", "1") // 2 spent, 3 returned
	if got := remaining(t, l, p, "lessee"); got[0] != 15 {
		t.Fatalf("after the grant of 10 and a return of 3: %v remaining, want 15 (the grant kept)", got)
	}
}

// usedModel is what a limit that cannot refill holds for one caller. The windows keep one
// count (below 0 after a grant); the buckets keep what is used and a credit apart.
type usedModel struct {
	limit, used, credit int64
	windows             bool
}

// left is what the model holds: the limit less what is used, plus any credit.
func (m *usedModel) left() int64 { return m.limit - m.used + m.credit }

// check admits cost when it fits (a credit paying first), and counts it.
func (m *usedModel) check(cost int64) bool {
	take := min(m.credit, cost)
	if m.used+cost-take > m.limit {
		return false
	}
	m.credit -= take
	m.used += cost - take
	return true
}

// adjust applies op: a reset uses nothing (grants gone); a refund takes back up to amount of
// what is used, never below 0; a grant counts below 0 (windows) or adds a credit (buckets).
func (m *usedModel) adjust(op Op, amount int64) {
	switch {
	case op == OpReset:
		m.used, m.credit = 0, 0
	case op == OpGrant && m.windows:
		m.used -= amount
	case op == OpGrant:
		m.credit += amount
	case m.used > 0:
		m.used = max(0, m.used-amount)
	}
}

// TestAdjustAgreesWithAModel: for every algorithm, 300 random steps on one caller of a limit
// of 12 that cannot refill while the test runs: checks of cost 1 to 3 and refunds, grants
// (1 to 8) and resets. Each decision and each adjustment's remaining and applied agree with
// usedModel.
func TestAdjustAgreesWithAModel(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		const limit = 12
		p := newPolicy(t, alg, FailClosed, Limit{Name: "model", Requests: limit, Period: 1000 * time.Hour})
		rng := rand.New(rand.NewPCG(7, uint64(len(alg))))
		m := &usedModel{limit: limit, windows: windows(alg)}
		for step := range 300 {
			if k := rng.IntN(10); k < 7 {
				cost := 1 + rng.Int64N(3)
				d := mustCheck(t, l, p, Request{Identity: "model", Cost: cost})
				if want := m.check(cost); d.Allowed != want {
					t.Fatalf("step %d: check of %d with %+v: allowed %v, want %v", step, cost, m, d.Allowed, want)
				}
				continue
			}
			op, amount := []Op{OpRefund, OpGrant, OpReset}[rng.IntN(3)], 1+rng.Int64N(8)
			before := m.left()
			m.adjust(op, amount)
			if op == OpReset {
				amount = 0
			}
			out := mustAdjust(t, l, p, "model", op, amount)
			if c := out.Limits[0]; c.Remaining != m.left() || c.Applied != m.left()-before {
				t.Fatalf("step %d: %s %d with %+v before: %+v, want %d remaining, %d applied", step, op, amount, before, c, m.left(), m.left()-before)
			}
		}
	})
}

// TestNoLeaseOfACredit: a bucket's grant is a credit that checks spend, never leases: while
// it lasts a lease call grants nothing (so no lease's return can give the bucket back units
// the credit paid for), and checks spend it exactly.
func TestNoLeaseOfACredit(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	ctx := context.Background()
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		p := newPolicy(t, alg, FailClosed, Limit{Name: "slow", Requests: 10, Period: 1000 * time.Hour})
		state := p.Keys("lessee", "")[0]
		admits(t, l, p, "lessee", 4)
		mustAdjust(t, l, p, "lessee", OpGrant, 5)
		v, err := evalOne(ctx, rdb, p.leaseScript, []string{state, state + ":lease:1"},
			append([]any{"5", p.ttlMS, "1", "-1", "1"}, p.limitArg...))
		if r, ok := v.([]any); err != nil || !ok || r[0] != int64(0) {
			t.Fatalf("%s: a lease while a credit lasts: %v, %v; want nothing granted", alg, v, err)
		}
		if got := admits(t, l, p, "lessee", 12); got != 11 {
			t.Fatalf("%s: 4 used of 10 and a credit of 5: %d of 12 admitted, want 11", alg, got)
		}
	}
}

// TestAdjustmentValidate: an adjustment names its bad field. A request id is 1 to 256 bytes
// of printable ASCII without spaces: one with a newline would write a line of its own into
// the Event and log line that record the change ("a\ngrant by system:admin ..." forged a
// second grant there), so it is refused, as are spaces, tabs, DEL and non-ASCII text.
func TestAdjustmentValidate(t *testing.T) {
	for _, id := range []string{"ticket-42", "kubectl-0123456789abcdef0123456789abcdef", "OPS-1/2#3:\"x\"", strings.Repeat("a", 256)} {
		if err := (Adjustment{Op: OpGrant, Amount: 1, RequestID: id}).Validate(); err != nil {
			t.Errorf("request id %q: %v, want it accepted", id, err)
		}
	}
	for _, c := range []struct {
		a    Adjustment
		want string
	}{
		{Adjustment{Op: "take", RequestID: "r"}, "op:"},
		{Adjustment{Op: OpReset, Amount: 1, RequestID: "r"}, "amount:"},
		{Adjustment{Op: OpGrant, RequestID: "r"}, "amount:"},
		{Adjustment{Op: OpRefund, Amount: MaxAdjustAmount + 1, RequestID: "r"}, "amount:"},
		{Adjustment{Op: OpGrant, Amount: 1}, "requestId: required"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: strings.Repeat("a", 257)}, "requestId: at most 256 bytes"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: "a\ngrant by system:admin for caller 0000000000000000"}, "requestId: byte 1 is not printable"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: "a\rb"}, "requestId: byte 1"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: "ticket 42"}, "requestId: byte 6"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: "t\t1"}, "requestId: byte 1"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: "t\x7f"}, "requestId: byte 1"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: "tü"}, "requestId: byte 1"},
		{Adjustment{Op: OpGrant, Amount: 1, RequestID: "t\u2028grant"}, "requestId: byte 1"},
	} {
		if err := c.a.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error beginning %q", c.a, err, c.want)
		}
	}
}
