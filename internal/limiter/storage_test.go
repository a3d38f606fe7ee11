package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

const testIdemTemplate = "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}"

// pttl returns a key's PTTL in ms: -1 without expiry, -2 when missing.
func pttl(t testing.TB, rdb *redis.Client, key string) time.Duration {
	t.Helper()
	ms, err := rdb.Do(context.Background(), "PTTL", key).Int64()
	if err != nil {
		t.Fatalf("PTTL %q: %v", key, err)
	}
	return time.Duration(ms) * time.Millisecond
}

// exists returns how many of keys exist.
func exists(t testing.TB, rdb *redis.Client, keys ...string) int64 {
	t.Helper()
	n, err := rdb.Exists(context.Background(), keys...).Result()
	if err != nil {
		t.Fatalf("EXISTS: %v", err)
	}
	return n
}

// TestEveryKeyHasTTL: after checks of every algorithm, with one and two limits, admitted,
// denied and replayed, with and without request ids, every key in Redis is one the policies
// declare, and has an expiry no longer than its TTL (the policy TTL for state keys, the
// idempotency TTL for request-id keys). No key lives forever.
func TestEveryKeyHasTTL(t *testing.T) {
	srv, rdb := standalone(t)
	admin := srv.Client()
	l := newLimiter(t, rdb, Options{})
	bound := map[string]time.Duration{} // every key a check may write -> its longest TTL
	idemKeys := 0
	for _, alg := range algorithms {
		for _, limits := range [][]Limit{
			{perHour("hourly", 3)},
			{perHour("hourly", 5), {Name: "minute", Requests: 2, Period: time.Minute, Burst: 2}},
		} {
			p := newPolicy(t, alg, FailOpen, limits...)
			for _, id := range []string{"alice", "bob"} {
				for i := range 8 {
					req := ""
					if i%2 == 1 {
						req = fmt.Sprintf("req-%d", i%5) // req-1 and req-3 twice: replays
					}
					mustCheck(t, l, p, Request{Identity: id, RequestID: req})
					keys := p.Keys(id, req)
					for _, k := range keys {
						bound[k] = p.TTL
					}
					if req != "" {
						bound[keys[len(keys)-1]] = p.IdempotencyTTL
					}
				}
			}
		}
	}
	keys := scanAll(t, admin)
	if len(keys) == 0 {
		t.Fatalf("no keys in Redis after the checks")
	}
	for _, k := range keys {
		longest, ok := bound[k]
		if !ok {
			t.Errorf("key %q is not one the policies declare", k)
			continue
		}
		if strings.Contains(k, ":idem:") {
			idemKeys++
		}
		if ttl := pttl(t, admin, k); ttl <= 0 || ttl > longest {
			t.Errorf("key %q: PTTL %s, want in (0, %s]", k, ttl, longest)
		}
	}
	t.Logf("%d keys, %d of them idempotency keys, all with a TTL", len(keys), idemKeys)
	if idemKeys == 0 {
		t.Errorf("no idempotency key was written")
	}
}

// TestIdleIdentitiesVanish: with a 300ms TTL, an identity that stops sending leaves nothing
// behind: one check later, once the TTL has passed, none of its keys exists.
func TestIdleIdentitiesVanish(t *testing.T) {
	srv, rdb := standalone(t)
	admin := srv.Client()
	l := newLimiter(t, rdb, Options{})
	const ttl = 300 * time.Millisecond
	var all []string
	for _, alg := range algorithms {
		// Period 100ms: a window (two for SlidingWindow) or a refill from empty fits in the TTL.
		p, err := NewPolicy(Spec{Namespace: "test", Name: "idle-" + string(alg), Algorithm: alg,
			Limits:   []Limit{{Name: "w", Requests: 5, Period: 100 * time.Millisecond}},
			StateKey: testTemplate, IdempotencyKey: testIdemTemplate,
			TTL: ttl, IdempotencyTTL: 200 * time.Millisecond, IdempotencyMaxReplays: 3, FailureMode: FailOpen})
		if err != nil {
			t.Fatalf("NewPolicy: %v", err)
		}
		mustCheck(t, l, p, Request{Identity: "idle", RequestID: "r1"})
		keys := p.Keys("idle", "r1")
		if n := exists(t, admin, keys...); n < 2 {
			t.Fatalf("%s: %d of %q exist right after the check, want the state and idempotency keys", alg, n, keys)
		}
		for _, k := range keys {
			if got := pttl(t, admin, k); got != -2*time.Millisecond && (got <= 0 || got > ttl) {
				t.Errorf("%s: key %q: PTTL %s, want in (0, %s]", alg, k, got, ttl)
			}
		}
		all = append(all, keys...)
	}
	time.Sleep(ttl + 150*time.Millisecond)
	for _, k := range all {
		if exists(t, admin, k) != 0 {
			t.Errorf("key %q still exists after its TTL", k)
		}
	}
	if n := admin.DBSize(context.Background()).Val(); n != 0 {
		t.Errorf("%d keys left after the TTL: %q", n, scanAll(t, admin))
	}
}

// TestIdempotency: a request id retried gets its first decision back (Replayed, same
// Remaining) and is debited once; its key expires within IdempotencyTTL. A denied request's
// id is not remembered: retrying it while the limit is exhausted is denied again, but because
// the limit is evaluated afresh each time, not because the denial was stored (no key exists).
// A replay of an admitted id stays admitted even once the limit is exhausted.
func TestIdempotency(t *testing.T) {
	srv, rdb := standalone(t)
	admin := srv.Client()
	l := newLimiter(t, rdb, Options{})
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			const limit = 5
			p := newPolicy(t, alg, FailOpen, perHour("hourly", limit))
			checkRetriesReplay(t, l, admin, p, limit)
			checkDeniedIDNotRemembered(t, l, admin, p, limit)
		})
	}
}

// checkRetriesReplay: req-1 sent 5 times is admitted once and replayed 4 times with the same
// remaining; a new id then sees one debit, not five.
func checkRetriesReplay(t *testing.T, l *Limiter, admin *redis.Client, p *Policy, limit int64) {
	t.Helper()
	first := mustCheck(t, l, p, Request{Identity: "a", RequestID: "req-1"})
	if !first.Allowed || first.Replayed || first.Remaining != limit-1 {
		t.Fatalf("first: %+v, want admitted, not replayed, %d left", first, limit-1)
	}
	for i := range 4 {
		d := mustCheck(t, l, p, Request{Identity: "a", RequestID: "req-1"})
		if !d.Allowed || !d.Replayed || d.Remaining != first.Remaining {
			t.Fatalf("retry %d: %+v, want admitted, replayed, %d left", i+1, d, first.Remaining)
		}
	}
	keys := p.Keys("a", "req-1")
	if got := pttl(t, admin, keys[len(keys)-1]); got <= 0 || got > p.IdempotencyTTL {
		t.Errorf("idempotency key %q: PTTL %s, want in (0, %s]", keys[len(keys)-1], got, p.IdempotencyTTL)
	}
	d := mustCheck(t, l, p, Request{Identity: "a", RequestID: "req-2"})
	if !d.Allowed || d.Replayed || d.Remaining != limit-2 {
		t.Fatalf("new id after 5 tries of one: %+v, want %d left (one debit)", d, limit-2)
	}
}

// checkDeniedIDNotRemembered exhausts the limit; a denied id leaves no key, so each retry is
// a fresh evaluation that the exhausted limit denies again; an admitted id still replays.
func checkDeniedIDNotRemembered(t *testing.T, l *Limiter, admin *redis.Client, p *Policy, limit int64) {
	t.Helper()
	for i := int64(3); i <= limit; i++ {
		if d := mustCheck(t, l, p, Request{Identity: "a", RequestID: fmt.Sprintf("req-%d", i)}); !d.Allowed {
			t.Fatalf("req-%d: %+v, want admitted", i, d)
		}
	}
	for i := range 3 {
		d := mustCheck(t, l, p, Request{Identity: "a", RequestID: "req-denied"})
		if d.Allowed || d.Replayed || d.DeniedBy != "hourly" {
			t.Fatalf("denied id, try %d: %+v, want denied by hourly, not replayed", i, d)
		}
	}
	if k := p.Keys("a", "req-denied"); exists(t, admin, k[len(k)-1]) != 0 {
		t.Errorf("a denied request id was remembered (%q exists)", k[len(k)-1])
	}
	d := mustCheck(t, l, p, Request{Identity: "a", RequestID: "req-1"})
	if !d.Allowed || !d.Replayed || d.Remaining != limit-1 {
		t.Fatalf("replay of req-1 after exhaustion: %+v, want its first decision (admitted, %d left)", d, limit-1)
	}
}

// TestIdempotencyDeniedIDEvaluatedAfresh: a request id denied once is admitted when retried
// after the retry-after (it was not remembered as denied), and only then replays.
func TestIdempotencyDeniedIDEvaluatedAfresh(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			p := newPolicy(t, alg, FailOpen, Limit{Name: "fast", Requests: 10, Period: time.Second, Burst: 1})
			mustCheck(t, l, p, Request{Identity: "a", RequestID: "first"})
			d := mustCheck(t, l, p, Request{Identity: "a", RequestID: "second"})
			if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond {
				t.Fatalf("second at once: %+v, want denied with retry-after in (0, 100ms]", d)
			}
			time.Sleep(d.RetryAfter + 20*time.Millisecond)
			if d := mustCheck(t, l, p, Request{Identity: "a", RequestID: "second"}); !d.Allowed || d.Replayed {
				t.Fatalf("retry of the denied id after retry-after: %+v, want admitted afresh (not replayed)", d)
			}
			if d := mustCheck(t, l, p, Request{Identity: "a", RequestID: "second"}); !d.Allowed || !d.Replayed {
				t.Fatalf("retry of the now admitted id: %+v, want replayed", d)
			}
		})
	}
}

// TestReplicaByteIdentical: the scripts read the Redis clock (TIME) and write values
// computed from it; replication must carry the written values, not re-run the script on the
// replica's clock. After checks of every algorithm and WAIT, every key holds the same bytes
// on the primary and the replica.
func TestReplicaByteIdentical(t *testing.T) {
	redistest.RequireRedis(t)
	primary := redistest.StartServer(t)
	replica := redistest.StartServer(t,
		redistest.WithArgs("--replicaof", redistest.Host, strconv.Itoa(primary.Port())))
	pc, rc := primary.Client(), replica.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := waitFor(10*time.Second, 20*time.Millisecond, func() error {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("replication link not up")
		}
		return nil
	}); err != nil {
		t.Fatalf("replica link: %v", err)
	}

	l := newLimiter(t, pc, Options{})
	for _, alg := range algorithms {
		p := newPolicy(t, alg, FailOpen, perHour("hourly", 4),
			Limit{Name: "minute", Requests: 10, Period: time.Minute, Burst: 3})
		for i := range 6 {
			req := ""
			if i%2 == 0 {
				req = fmt.Sprintf("req-%d", i)
			}
			mustCheck(t, l, p, Request{Identity: fmt.Sprintf("id-%d", i%2), RequestID: req})
		}
	}
	n, err := pc.Wait(ctx, 1, 2*time.Second).Result()
	if err != nil || n < 1 {
		t.Fatalf("WAIT 1 2000 = %d, %v; want the replica to acknowledge", n, err)
	}
	keys := scanAll(t, pc)
	if len(keys) == 0 {
		t.Fatalf("no keys on the primary")
	}
	for _, k := range keys {
		pv, err := pc.Get(ctx, k).Result()
		if err != nil {
			t.Fatalf("GET %q on the primary: %v", k, err)
		}
		rv, err := rc.Get(ctx, k).Result()
		if err != nil {
			t.Errorf("GET %q on the replica: %v", k, err)
			continue
		}
		if pv != rv {
			t.Errorf("key %q: primary %x, replica %x", k, pv, rv)
		}
	}
	if rn := rc.DBSize(ctx).Val(); rn != int64(len(keys)) {
		t.Errorf("replica holds %d keys, primary %d", rn, len(keys))
	}
	t.Logf("%d keys byte-identical on primary and replica", len(keys))
}

// TestDenyCache: once Redis denies until a known time, further checks of the same identity
// with the same or a larger cost are answered in-process (Source DenyCache, no script call
// reaches Redis) with a shrinking retry-after; a smaller cost still asks Redis; and once the
// retry-after has passed, Redis is asked again.
func TestDenyCache(t *testing.T) {
	srv, rdb := standalone(t)
	admin := srv.Client()
	l := newLimiter(t, rdb, Options{DenyCacheSize: 1000})
	// GCRA, one cell per 100ms, burst 3: after a cost-3 request a cost-2 one waits ~200ms.
	p := newPolicy(t, GCRA, FailOpen, Limit{Name: "smooth", Requests: 10, Period: time.Second, Burst: 3})
	check := func(cost int64) Decision {
		return l.Check(context.Background(), p, Request{Identity: "a", Cost: cost})
	}
	if d := check(3); d.Source != SourceRedis || !d.Allowed {
		t.Fatalf("cost 3 on a full burst: %+v, want admitted by Redis", d)
	}
	denied := check(2)
	if denied.Source != SourceRedis || denied.Allowed || denied.RetryAfter < 100*time.Millisecond || denied.RetryAfter > 200*time.Millisecond {
		t.Fatalf("cost 2 at once: %+v, want denied by Redis with retry-after in [100ms, 200ms]", denied)
	}

	calls := scriptCalls(t, admin)
	cached := checkDenyCacheAnswers(t, check, denied)
	if got := scriptCalls(t, admin); got != calls {
		t.Fatalf("%d script calls reached Redis while the deny cache answered, want 0", got-calls)
	}

	smaller := check(1)
	if smaller.Source != SourceRedis {
		t.Fatalf("smaller cost 1: %+v, want asked Redis", smaller)
	}
	if got := scriptCalls(t, admin); got != calls+1 {
		t.Fatalf("smaller cost: %d script calls reached Redis, want 1", got-calls)
	}

	time.Sleep(max(cached.RetryAfter, smaller.RetryAfter) + 20*time.Millisecond)
	calls = scriptCalls(t, admin)
	after := check(1)
	if after.Source != SourceRedis || !after.Allowed {
		t.Fatalf("after the retry-after: %+v, want admitted by Redis", after)
	}
	if got := scriptCalls(t, admin); got != calls+1 {
		t.Fatalf("after the retry-after: %d script calls reached Redis, want 1", got-calls)
	}
}

// checkDenyCacheAnswers: after Redis denied cost 2, checks of cost 2 and 3 are answered from
// the deny cache, with a retry-after that shrinks as time passes. It returns the last one.
func checkDenyCacheAnswers(t *testing.T, check func(cost int64) Decision, denied Decision) Decision {
	t.Helper()
	c1 := check(2)
	if c1.Source != SourceDenyCache || c1.Allowed || c1.DeniedBy != "smooth" || c1.RetryAfter <= 0 || c1.RetryAfter > denied.RetryAfter {
		t.Fatalf("cost 2 again: %+v, want denied from the deny cache with 0 < retry-after <= %s", c1, denied.RetryAfter)
	}
	if d := check(3); d.Source != SourceDenyCache || d.Allowed {
		t.Fatalf("larger cost 3: %+v, want denied from the deny cache", d)
	}
	time.Sleep(20 * time.Millisecond)
	c2 := check(2)
	if c2.Source != SourceDenyCache || c2.RetryAfter > c1.RetryAfter-15*time.Millisecond {
		t.Fatalf("20ms later: %+v, want from the deny cache with retry-after below %s", c2, c1.RetryAfter-15*time.Millisecond)
	}
	for i := range 50 {
		if d := check(2); d.Source != SourceDenyCache || d.Allowed {
			t.Fatalf("hammering, check %d: %+v, want denied from the deny cache", i, d)
		}
	}
	return c2
}

// TestDenyCacheExpiryLetsOneThrough: when a cached denial expires, one caller goes to Redis
// and the others keep the denial for the grace period; an admission forgets the entry.
func TestDenyCacheExpiryLetsOneThrough(t *testing.T) {
	const grace = 50 * time.Millisecond
	c, err := newDenyCache(10, time.Hour, grace)
	if err != nil {
		t.Fatal(err)
	}
	p := newPolicy(t, GCRA, FailOpen, Limit{Name: "smooth", Requests: 10, Period: time.Second, Burst: 3})
	t0 := time.Unix(1000, 0)
	c.put(p, "hot", 1, Decision{RetryAfter: 100 * time.Millisecond, ResetAfter: 300 * time.Millisecond, DeniedBy: "smooth"}, t0)
	expired := t0.Add(100 * time.Millisecond)
	if _, ok := c.get(p, "hot", 1, expired); ok {
		t.Fatal("the first caller after expiry must go to Redis")
	}
	for i := range 10 {
		d, ok := c.get(p, "hot", 1, expired.Add(time.Duration(i)*time.Millisecond))
		if !ok || d.Allowed || d.RetryAfter > grace || d.ResetAfter != 200*time.Millisecond-time.Duration(i)*time.Millisecond {
			t.Fatalf("caller %d during the refresh: %+v %v, want the denial for at most %s, reset 200ms-%dms", i, d, ok, grace, i)
		}
	}
	if _, ok := c.get(p, "hot", 1, expired.Add(grace)); ok {
		t.Fatal("after the grace a refresher that never answered must not block the next caller")
	}
	c.put(p, "hot", 1, Decision{Allowed: true}, expired.Add(grace))
	if _, ok := c.get(p, "hot", 1, expired.Add(grace+time.Millisecond)); ok {
		t.Fatal("an admission must forget the denial")
	}
}

// TestDenyCacheNeverOutlastsTheHorizon: a denial whose retry-after reaches past the policy's
// horizon (a reply of an older script, after an edit raised a window's period) is answered
// locally for at most the horizon, so deleting the key frees the caller within it.
func TestDenyCacheNeverOutlastsTheHorizon(t *testing.T) {
	c, err := newDenyCache(10, 2*time.Hour, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	p := newPolicy(t, FixedWindow, FailOpen, perHour("hourly", 3))
	t0 := time.Unix(1000, 0)
	c.put(p, "alice", 1, Decision{RetryAfter: 2_000_000 * time.Hour, DeniedBy: "hourly"}, t0)
	if d, ok := c.get(p, "alice", 1, t0.Add(time.Minute)); !ok || d.RetryAfter > time.Hour {
		t.Fatalf("a minute later: %+v %v, want the cached denial with retry-after at most 1h", d, ok)
	}
	if _, ok := c.get(p, "alice", 1, t0.Add(time.Hour)); ok {
		t.Fatal("after the policy's horizon (1h) the caller must be asked about in Redis again")
	}
}

// TestDenyCacheHoldsAtMostItsHold: a denial for an hour is answered locally for the cache's
// hold only, with the retry-after Redis gave, so a reset or grant made in Redis meanwhile
// (Limiter.Adjust) reaches the caller within the hold.
func TestDenyCacheHoldsAtMostItsHold(t *testing.T) {
	const hold = 5 * time.Second
	c, err := newDenyCache(10, hold, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	p := newPolicy(t, FixedWindow, FailOpen, perHour("hourly", 3))
	t0 := time.Unix(1000, 0)
	c.put(p, "alice", 1, Decision{RetryAfter: 50 * time.Minute, ResetAfter: 50 * time.Minute, DeniedBy: "hourly"}, t0)
	d, ok := c.get(p, "alice", 1, t0.Add(4*time.Second))
	if want := 50*time.Minute - 4*time.Second; !ok || d.RetryAfter != want || d.ResetAfter != want {
		t.Fatalf("4s later: %+v %v, want the cached denial with Redis's retry-after, now %s", d, ok, want)
	}
	if _, ok := c.get(p, "alice", 1, t0.Add(hold)); ok {
		t.Fatalf("after the hold (%s) the caller must be asked about in Redis again", hold)
	}
}
