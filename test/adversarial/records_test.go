package adversarial

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Issue 39, item 1: the adjustment function re-read its idempotency record with a pattern
// loop and no size check. The record lives under the tenant's own prefix, which its Redis
// user may SET: one record of 1 MiB written once, then short FCALLs of the adjustment
// function held Redis 230 ms each and replied with 524,281 integers, and while they looped,
// 0 of 30 checks of another namespace were decided by Redis.

const (
	// hostileSize is a value too long for any key kind: the longest the rig's Redis takes in
	// one SET (proto-max-bulk-len 1mb, as docs/operations.md asks), as issue 39 wrote it.
	hostileSize = 1<<20 - 64
	// hostileCallBound is the most one call may hold Redis, reading a hostile value: the
	// calls take 2 to 32 µs here, while one that read a value of hostileSize whole takes
	// 1.6 ms (MGET into Lua, measured on Redis 7.0).
	hostileCallBound = 500 * time.Microsecond
)

// fcallTime is the Redis time (µs) c's server has spent in FCALL and FCALL_RO so far.
func fcallTime(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	return commandTime(t, c, "fcall", "fcall_ro")
}

// commandTime is the Redis time (µs) c's server has spent in commands so far (INFO
// commandstats).
func commandTime(t *testing.T, c redis.UniversalClient, commands ...string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !slices.Contains(commands, name) {
			continue
		}
		for _, f := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}

// recordHash names an adjustment's record after its request id, as the limiter does.
func recordHash(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return hex.EncodeToString(sum[:16])
}

// adjustFingerprint is the fingerprint the limiter binds an adjustment's request id to:
// what the attacker writes first in the record, so that the script reads on.
func adjustFingerprint(namespace, policy, identity string, op limiter.Op, amount int64) string {
	return fingerprintOf(namespace, policy, identity, string(op), strconv.FormatInt(amount, 10))
}

// fingerprintOf is how the limiter fingerprints what a request id stands for: the first 16
// bytes of SHA-256 over the parts, each length-prefixed.
func fingerprintOf(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return string(h.Sum(nil)[:16])
}

// TestTenantsOwnRecordCannotStallRedis: the attacker writes a record of 1 MiB under its own
// prefix and calls its own adjustment function on it from four connections for as long as
// the victim namespace's sidecar takes 30 checks (with a 150 ms timeout: a stalled Redis
// shows as failure-mode answers). Each adjustment must be refused before any loop (an
// error, holding Redis less than hostileCallBound), and all 30 checks decided by Redis.
func TestTenantsOwnRecordCannotStallRedis(t *testing.T) {
	ts := newTenants(t, ns, attackerNS)
	own := ts.of(attackerNS)
	lim, err := limiter.New(own, limiter.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: attackerNS, Name: "own", Algorithm: limiter.FixedWindow,
		Limits:   []limiter.Limit{{Name: "hour", Requests: 10, Period: time.Hour}},
		StateKey: "{rl:attacker/own:${identity}}:${limit}", TTL: time.Hour, FailureMode: limiter.FailOpen, Functions: true})
	if err != nil {
		t.Fatal(err)
	}
	const requestID = "loop-me"
	record := adjustFingerprint(attackerNS, "own", "x", limiter.OpGrant, 1) + strings.Repeat("1,", (hostileSize-16)/2)
	if err := own.Set(context.Background(), p.Keys("x", "")[0]+":adjust:"+recordHash(requestID), record, time.Hour).Err(); err != nil {
		t.Fatalf("the attacker writes its own record: %v", err)
	}
	grant := limiter.Adjustment{Op: limiter.OpGrant, Identity: "x", Amount: 1, RequestID: requestID}
	admin := ts.srv.Client()
	least := time.Hour
	for range 3 {
		before := fcallTime(t, admin)
		out, err := lim.Adjust(context.Background(), p, grant)
		least = min(least, time.Duration(fcallTime(t, admin)-before)*time.Microsecond)
		if err == nil {
			t.Errorf("an adjustment on a record of 1 MiB answered %d limits, replayed %v: want it refused", len(out.Limits), out.Replayed)
		}
	}
	if least > hostileCallBound {
		t.Errorf("an adjustment on a record of 1 MiB held Redis %s (least of 3), over %s", least, hostileCallBound)
	}

	victim := newRigOn(t, ts.of(ns), snapshot.Redis{Mode: string(redisconn.ModeStandalone), Addrs: []string{ts.srv.Addr()}, Functions: true},
		limiter.Options{Timeout: 150 * time.Millisecond}, httpserver.DefaultLimits(),
		newPolicy("api", v1alpha1.AlgorithmTokenBucket, 1000, time.Hour))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = lim.Adjust(context.Background(), p, grant)
				calls.Add(1)
			}
		}()
	}
	decided := victim.byRedis(t, "api", "alice", 30)
	close(stop)
	wg.Wait()
	if decided != 30 {
		t.Fatalf("%d of 30 checks of another namespace decided by Redis while the attacker looped (%d adjustments), want 30", decided, calls.Load())
	}
}

// replayFingerprint is the fingerprint the limiter binds a check's request id to: the
// namespace, policy, identity, cost and the request's description.
func replayFingerprint(namespace, policy, identity string, cost int64, description string) string {
	return fingerprintOf(namespace, policy, identity, strconv.FormatInt(cost, 10), description)
}

// TestForgedReplayRecordIsNoAdmission: beyond issue 39's list, the same class on the check
// script: an idempotency record of the right length and fingerprint but figures no check
// writes (a limit index of 15 of a policy with one limit) was replayed as they were, and the
// sidecar, unable to read the reply, fell to the failure mode: FailOpen admitted a caller
// whose limit was spent. Such a record must count as none: the check is a new request, and
// Redis denies it.
func TestForgedReplayRecordIsNoAdmission(t *testing.T) {
	ts := newTenants(t, attackerNS)
	own := ts.of(attackerNS)
	lim, err := limiter.New(own, limiter.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: attackerNS, Name: "replays", Algorithm: limiter.GCRA,
		Limits:   []limiter.Limit{{Name: "hour", Requests: 1, Period: time.Hour}},
		StateKey: "{rl:attacker/replays:${identity}}:${limit}", IdempotencyKey: "{rl:attacker/replays:${identity}}:idem:${requestId}",
		IdempotencyTTL: time.Minute, TTL: time.Hour, FailureMode: limiter.FailOpen, Functions: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d := lim.Check(ctx, p, limiter.Request{Identity: "x"}); !d.Allowed {
		t.Fatalf("the one request of the hour: %+v", d)
	}
	record := make([]byte, 24)
	binary.LittleEndian.PutUint64(record, math.Float64bits(1+4*15)) // allowed, limit index 15
	record = append(record, replayFingerprint(attackerNS, "replays", "x", 1, "forged")...)
	keys := p.Keys("x", "forged")
	if err := own.Set(ctx, keys[len(keys)-1], record, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d := lim.Check(ctx, p, limiter.Request{Identity: "x", RequestID: "forged", Fingerprint: "forged"})
		if d.Allowed || d.WithoutRedis() {
			t.Fatalf("a check replaying a forged record: %+v (source %s, %v), want Redis's denial", d, d.Source, d.Err)
		}
	}
}
