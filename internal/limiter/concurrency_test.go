package limiter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// concurrentPolicy is a policy of alg with rate limits and a concurrency limit of most slots
// living slotTTL, without idempotency (which a concurrency limit refuses).
func concurrentPolicy(t testing.TB, alg Algorithm, most int64, slotTTL time.Duration, limits ...Limit) *Policy {
	t.Helper()
	policySeq++
	p, err := NewPolicy(Spec{Namespace: "test", Name: fmt.Sprintf("slots-%s-%d-%d", alg, policySeq, time.Now().UnixNano()),
		Algorithm: alg, Limits: limits, StateKey: testTemplate, TTL: max(2*time.Hour, Horizon(alg, limits)), FailureMode: FailClosed,
		Concurrency: &Concurrency{Max: most, SlotTTL: slotTTL}})
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

// acquireOne checks identity with a fresh slot; it returns the slot when admitted.
func acquireOne(t testing.TB, l *Limiter, p *Policy, identity string) (Decision, string) {
	t.Helper()
	slot := NewID()
	d := l.Check(context.Background(), p, Request{Identity: identity, Slot: slot})
	if d.Source != SourceRedis {
		t.Fatalf("acquire from %s: %v", d.Source, d.Err)
	}
	return d, slot
}

// mustRelease releases slot and requires it held as want says.
func mustRelease(t testing.TB, l *Limiter, p *Policy, identity, slot string, want bool) {
	t.Helper()
	held, err := l.Release(context.Background(), p, identity, slot)
	if err != nil || held != want {
		t.Fatalf("release: held %v, %v; want %v", held, err, want)
	}
}

// TestConcurrencyLimitsInFlight: for every algorithm, 3 slots and a rate of 100 an hour. Three
// requests in flight are admitted (the last reporting 0 slots left), a fourth is denied by
// the concurrency limit and debits no rate; a release lets the next in, a second release
// of the same slot holds nothing; a request its rate denies takes no slot.
func TestConcurrencyLimitsInFlight(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, l *Limiter, alg Algorithm) {
		// Windows of 1000 h: no run crosses one's end, which would hand out a fresh rate.
		p := concurrentPolicy(t, alg, 3, time.Minute, Limit{Name: "long", Requests: 100, Period: 1000 * time.Hour})
		var slots []string
		for i := range 3 {
			d, slot := acquireOne(t, l, p, "alice")
			if !d.Allowed {
				t.Fatalf("request %d of 3 in flight: %+v", i+1, d)
			}
			slots = append(slots, slot)
		}
		d, _ := acquireOne(t, l, p, "alice")
		if d.Allowed || d.DeniedBy != ConcurrencyLimitName || d.Remaining != 0 || d.Limit != 3 || d.RetryAfter != time.Second {
			t.Fatalf("a 4th in flight: %+v, want denied by %s, retry in 1s", d, ConcurrencyLimitName)
		}
		if got := remaining(t, l, p, "alice"); got[0] != 97 {
			t.Fatalf("after 3 admitted and 1 refused a slot: %d of the rate left, want 97", got[0])
		}
		mustRelease(t, l, p, "alice", slots[0], true)
		mustRelease(t, l, p, "alice", slots[0], false)
		if d, _ := acquireOne(t, l, p, "alice"); !d.Allowed {
			t.Fatalf("after a release: %+v", d)
		}
		if d, _ := acquireOne(t, l, p, "bob"); !d.Allowed || d.Remaining != 2 || d.LimitName != ConcurrencyLimitName {
			t.Fatalf("another caller: %+v, want its own 3 slots (2 left)", d)
		}

		tight := concurrentPolicy(t, alg, 5, time.Minute, Limit{Name: "long", Requests: 2, Period: 1000 * time.Hour})
		for range 3 {
			acquireOne(t, l, tight, "carol")
		}
		if n := slotsHeld(t, l.rdb, tight, "carol"); n != 2 {
			t.Fatalf("3 requests on a rate of 2: %d slots held, want 2 (the denied one takes none)", n)
		}
	})
}

// slotsHeld is how many slots identity's ring counts (its buckets not ended).
func slotsHeld(t *testing.T, rdb redis.UniversalClient, p *Policy, identity string) int {
	t.Helper()
	v, err := rdb.Get(context.Background(), p.slotsKey(identity)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	now := float64(time.Now().UnixMicro())
	held := 0
	for i := 0; i+16 <= len(v); i += 16 {
		end := math.Float64frombits(binary.BigEndian.Uint64([]byte(v[i:])))
		if end > now {
			held += int(math.Float64frombits(binary.BigEndian.Uint64([]byte(v[i+8:]))))
		}
	}
	return held
}

// ringOf is a ring value holding count slots in one bucket ending at end (µs), the rest
// empty.
func ringOf(end float64, count float64) string {
	b := make([]byte, 16*slotRing)
	binary.BigEndian.PutUint64(b, math.Float64bits(end))
	binary.BigEndian.PutUint64(b[8:], math.Float64bits(count))
	return string(b)
}

// slotRing is the ring's buckets (acquire.lua).
const slotRing = 32

// TestSlotsValueOfAnotherShape: a slots value that is not a ring, or a ring whose counts are
// not whole numbers from 1 to 1000 (written by hand, or by a tenant through its own
// credentials), counts as no slot held and is overwritten by the next admission: the script
// never reads more than the ring, whatever the value. A ring of ours holding every slot
// refuses.
func TestSlotsValueOfAnotherShape(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	p := concurrentPolicy(t, FixedWindow, 2, time.Minute, perHour("hourly", 100))
	future := float64(time.Now().Add(time.Hour).UnixMicro())
	for _, v := range []string{"not a ring", ringOf(future, 2) + "x", ringOf(future, 2)[1:], ringOf(future, 5000),
		ringOf(future, 1.5), ringOf(math.NaN(), 2), ringOf(math.Inf(1), 2), strings.Repeat("x", 1<<20-64)} {
		if err := rdb.Set(context.Background(), p.slotsKey("erin"), v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if d, _ := acquireOne(t, l, p, "erin"); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("over a value of %d bytes: %+v, want admitted with 1 slot left", len(v), d)
		}
		if n := slotsHeld(t, rdb, p, "erin"); n != 1 {
			t.Fatalf("after it: %d slots held, want 1", n)
		}
	}
	if err := rdb.Set(context.Background(), p.slotsKey("erin"), ringOf(future, 2), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if d, _ := acquireOne(t, l, p, "erin"); d.Allowed {
		t.Fatalf("over 2 slots held for an hour: %+v, want refused", d)
	}
}

// TestReleaseOnlyWhatWasTaken: a slot is given back once, only by its own id and identity:
// an id never taken, another identity's, or a release repeated frees nothing.
func TestReleaseOnlyWhatWasTaken(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	p := concurrentPolicy(t, TokenBucket, 2, time.Minute, perHour("hourly", 100))
	_, slot := acquireOne(t, l, p, "hank")
	acquireOne(t, l, p, "hank")
	_, other := acquireOne(t, l, p, "ivy")
	mustRelease(t, l, p, "hank", NewID(), false)
	mustRelease(t, l, p, "hank", other, false)
	mustRelease(t, l, p, "ivy", slot, false)
	if n := slotsHeld(t, rdb, p, "hank"); n != 2 {
		t.Fatalf("hank holds %d slots after releases not his, want 2", n)
	}
	mustRelease(t, l, p, "hank", slot, true)
	mustRelease(t, l, p, "hank", slot, false)
	if n := slotsHeld(t, rdb, p, "hank"); n != 1 {
		t.Fatalf("hank holds %d slots after his release, repeated, want 1", n)
	}
	if _, err := l.Release(context.Background(), p, "hank", strings.ToUpper(NewID())); err == nil {
		t.Fatal("a release of an id that is not lowercase hexadecimal: accepted")
	}
}

// TestSlotsExpire: slots never released (a crashed sidecar) come back after the slot ttl.
func TestSlotsExpire(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	p := concurrentPolicy(t, FixedWindow, 2, time.Second, perHour("hourly", 100))
	acquireOne(t, l, p, "dave")
	acquireOne(t, l, p, "dave")
	if d, _ := acquireOne(t, l, p, "dave"); d.Allowed {
		t.Fatalf("a 3rd of 2: %+v", d)
	}
	time.Sleep(1100 * time.Millisecond) // the slot ttl and the ring's bucket (1 s / 30)
	if d, _ := acquireOne(t, l, p, "dave"); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after the slot ttl: %+v, want admitted with 1 slot left", d)
	}
}

// TestConcurrencyRefusesClashes: a concurrency limit out of bounds, or with leases, shards
// or idempotency, is refused naming the field.
func TestConcurrencyRefusesClashes(t *testing.T) {
	base := func() Spec {
		return Spec{Namespace: "test", Name: "c", Algorithm: FixedWindow, Limits: []Limit{perHour("hourly", 10)},
			StateKey: testTemplate, TTL: 2 * time.Hour, FailureMode: FailClosed, Concurrency: &Concurrency{Max: 3, SlotTTL: time.Minute}}
	}
	for _, tc := range []struct {
		edit func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Concurrency.Max = 0 }, "concurrency.max"},
		{func(s *Spec) { s.Concurrency.Max = MaxConcurrency + 1 }, "concurrency.max"},
		{func(s *Spec) { s.Concurrency.SlotTTL = 999 * time.Millisecond }, "concurrency.slotTTL"},
		{func(s *Spec) { s.Concurrency.SlotTTL = 25 * time.Hour }, "concurrency.slotTTL"},
		{func(s *Spec) { s.Leases = true }, "hotKeys.leases"},
		{func(s *Spec) { s.Limits[0].Name = ConcurrencyLimitName }, "limits[0].name"},
		{func(s *Spec) { s.Shards = 2 }, "hotKeys.shards"},
		{func(s *Spec) {
			s.IdempotencyKey, s.IdempotencyTTL, s.IdempotencyMaxReplays = "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}", time.Minute, 3
		}, "idempotency"},
	} {
		s := base()
		tc.edit(&s)
		if _, err := NewPolicy(s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", s.Concurrency, err, tc.want)
		}
	}
}

// inFlightUnderLoad has 32 workers × 15 requests of one identity acquire, hold 0-4 ms and
// release, and returns the most in flight at once as the workers saw it (counted after an
// admission returns and before its release is sent: never more than Redis held) and the
// admissions.
func inFlightUnderLoad(t *testing.T, ls []*Limiter, p *Policy) (most, admitted int64) {
	var now, peak, ok atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := ls[w%len(ls)]
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 15 {
				d, slot := acquireOne(t, l, p, "team")
				if !d.Allowed {
					continue
				}
				ok.Add(1)
				n := now.Add(1)
				for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
				}
				time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
				now.Add(-1)
				mustRelease(t, l, p, "team", slot, true)
			}
		}()
	}
	wg.Wait()
	return peak.Load(), ok.Load()
}

// TestConcurrencyExactUnderLoad: 4 slots, 32 workers on two limiters (two sidecars) of one
// standalone Redis, and on a 3-primary Cluster: never more than 4 in flight, every slot
// given back at the end, and slots used (more admissions than slots).
func TestConcurrencyExactUnderLoad(t *testing.T) {
	for _, setup := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { _, rdb := standalone(t); return rdb }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return startClusterT(t).Client() }},
	} {
		t.Run(setup.name, func(t *testing.T) {
			rdb := setup.rdb(t)
			ls := []*Limiter{newLimiter(t, rdb, Options{}), newLimiter(t, rdb, Options{})}
			p := concurrentPolicy(t, TokenBucket, 4, time.Minute, Limit{Name: "rate", Requests: 100000, Period: time.Second})
			most, admitted := inFlightUnderLoad(t, ls, p)
			t.Logf("%s: at most %d in flight of 4, %d admitted of 480", setup.name, most, admitted)
			if most > 4 || admitted < 8 {
				t.Fatalf("%d in flight at most, %d admitted: want at most 4, and slots reused", most, admitted)
			}
			if n := slotsHeld(t, rdb, p, "team"); n != 0 {
				t.Fatalf("%d slots held after every release", n)
			}
		})
	}
}

// TestTiersShareSlots: two tiers of one policy (the same policy with other limits, as a tier
// or an override compiles) count one identity's requests in flight together: 2 slots, one
// taken under each tier, and a third request under either is refused.
func TestTiersShareSlots(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	spec := func(limit string) *Policy {
		p, err := NewPolicy(Spec{Namespace: "test", Name: "tiered-slots", Algorithm: TokenBucket, Limits: []Limit{perHour(limit, 100)},
			StateKey: testTemplate, TTL: 2 * time.Hour, FailureMode: FailClosed, Concurrency: &Concurrency{Max: 2, SlotTTL: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	free, pro := spec("free-hourly"), spec("pro-hourly")
	for _, p := range []*Policy{free, pro} {
		if d, _ := acquireOne(t, l, p, "frank"); !d.Allowed {
			t.Fatalf("one in flight under %s: %+v", p.Limits[0].Name, d)
		}
	}
	for _, p := range []*Policy{free, pro} {
		if d, _ := acquireOne(t, l, p, "frank"); d.Allowed || d.DeniedBy != ConcurrencyLimitName {
			t.Fatalf("a third under %s: %+v, want refused a slot", p.Limits[0].Name, d)
		}
	}
}

// TestPeekShowsSlots: a peek of a policy with a concurrency limit reports its slots after
// the rate limits (2 of 3 free with one in flight, the rate's 99 of 100), takes none, and
// decides as a check would: refused once every slot is held.
func TestPeekShowsSlots(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	p := concurrentPolicy(t, GCRA, 3, time.Minute, perHour("hourly", 100))
	acquireOne(t, l, p, "gina")
	for range 3 {
		pk := l.Peek(context.Background(), p, Request{Identity: "gina", Cost: 1})
		if len(pk.Limits) != 2 || pk.Limits[1].Name != ConcurrencyLimitName || pk.Limits[1].Remaining != 2 ||
			pk.Limits[0].Remaining != 99 || !pk.Allowed {
			t.Fatalf("peek with one in flight: %+v", pk)
		}
	}
	acquireOne(t, l, p, "gina")
	acquireOne(t, l, p, "gina")
	pk := l.Peek(context.Background(), p, Request{Identity: "gina", Cost: 1})
	if pk.Allowed || pk.DeniedBy != ConcurrencyLimitName || pk.Limits[1].Remaining != 0 {
		t.Fatalf("peek with every slot held: %+v, want refused by %s", pk, ConcurrencyLimitName)
	}
}
