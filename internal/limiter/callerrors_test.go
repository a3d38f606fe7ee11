package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// Call errors (issue 13, item 5): a reply that is one call's or one policy's fault (CROSSSLOT,
// NOPERM, a script error, ...) must never count against the health of the node that gave
// it. Each case hammers a bad policy far past the breaker threshold while a good policy whose
// keys live on the same node keeps checking: every good check must be decided by Redis, every
// bad one by its failure mode with the Redis error, and the call errors must not make the
// client reload the slot map.

const (
	// ceRounds is how many checks each goroutine of a case makes: ten times the breaker threshold.
	ceRounds = 50
	// ceBadWorkers is how many goroutines make bad checks beside the one making good checks.
	ceBadWorkers = 4
	// ceUser is the ACL user of the NOPERM cases: all commands, only keys under {rl:.
	ceUser, cePassword = "limited", "limited-pw"
)

// ceACLArgs declares ceUser on a server (the harness's own clients stay the default user).
var ceACLArgs = []string{"--user", ceUser, "on", ">" + cePassword, "~{rl:*", "&*", "+@all"}

// ceCase is one bad policy next to a good one, on one node.
type ceCase struct {
	bad, good     *Policy
	badID, goodID string
	want          string // the error the bad policy's checks carry
	limiter       *Limiter
	nodes         []*redistest.Server // whose CLUSTER SLOTS calls are counted
}

// TestCallErrorsKeepBreakerClosed: a policy whose keys cross slots (CROSSSLOT on Cluster) or
// lie outside the ACL user's key pattern (NOPERM) fails every call, but the node is healthy:
// the breaker of that node stays closed for every other policy, with and without pipelining.
func TestCallErrorsKeepBreakerClosed(t *testing.T) {
	redistest.RequireRedis(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, o Options) *ceCase
	}{
		{"cluster/CROSSSLOT", ceClusterCrossSlot},
		{"cluster/NOPERM", ceClusterNoPerm},
		{"standalone/NOPERM", ceStandaloneNoPerm},
	} {
		for _, pipelining := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pipelining=%v", tc.name, pipelining), func(t *testing.T) {
				c := tc.setup(t, Options{Pipelining: pipelining, Timeout: 2 * time.Second})
				ceHammer(t, c)
			})
		}
	}
}

// ceHammer first makes ceRounds bad checks in a row, then runs ceBadWorkers goroutines of bad
// checks beside one of good checks, ceRounds each, and checks every decision.
func ceHammer(t *testing.T, c *ceCase) {
	t.Helper()
	mustCheck(t, c.limiter, c.good, Request{Identity: c.goodID}) // the slot map is loaded
	reloadsBefore := ceSlotReloads(t, c.nodes)
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		badErrs   []string
		goodLocal []Decision
	)
	bad := func() {
		d := c.limiter.Check(context.Background(), c.bad, Request{Identity: c.badID})
		if d.Source != SourceFailClosed || d.Err == nil || !strings.Contains(d.Err.Error(), c.want) {
			mu.Lock()
			badErrs = append(badErrs, fmt.Sprintf("%+v", d))
			mu.Unlock()
		}
	}
	good := func() {
		if d := c.limiter.Check(context.Background(), c.good, Request{Identity: c.goodID}); d.Source != SourceRedis {
			mu.Lock()
			goodLocal = append(goodLocal, d)
			mu.Unlock()
		}
	}
	for range ceRounds {
		bad()
	}
	good()
	for range ceBadWorkers {
		wg.Go(func() {
			for range ceRounds {
				bad()
			}
		})
	}
	wg.Go(func() {
		for range ceRounds {
			good()
		}
	})
	wg.Wait()
	reloads := ceSlotReloads(t, c.nodes) - reloadsBefore
	nBad, nGood := ceRounds*(1+ceBadWorkers), ceRounds+1
	t.Logf("%d bad checks (%d not a FailClosed decision with %s), %d good checks (%d without Redis), %d slot-map reloads",
		nBad, len(badErrs), c.want, nGood, len(goodLocal), reloads)
	if len(badErrs) > 0 {
		t.Errorf("bad policy: %d of %d decisions are not FailClosed with %s, first: %s", len(badErrs), nBad, c.want, badErrs[0])
	}
	if len(goodLocal) > 0 {
		t.Errorf("good policy on the same node: %d of %d decisions without Redis, first: %+v", len(goodLocal), nGood, goodLocal[0])
	}
	if reloads > 0 {
		t.Errorf("call errors made the client reload the slot map %d times, want 0", reloads)
	}
	if st := c.limiter.ErrorStats(); st.Call != uint64(nBad) || st.Node != 0 || st.CircuitOpen != 0 {
		t.Errorf("ErrorStats %+v, want Call %d and no node errors or open circuits", st, nBad)
	}
}

// ceSlotReloads is how many CLUSTER SLOTS the nodes have answered (0 on standalone).
func ceSlotReloads(t *testing.T, nodes []*redistest.Server) int64 {
	t.Helper()
	var n int64
	for _, s := range nodes {
		info, err := s.Client().Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatalf("INFO commandstats on %s: %v", s.Addr(), err)
		}
		n += commandCalls(t, info, "cluster|slots")
	}
	return n
}

// cePolicy builds a FailClosed token bucket policy with two limits on template. NewPolicy
// now refuses a tag that can expand to "{}" (such as "{${identity}}"), which an older
// release admitted and a hand-written snapshot file can still carry; such a template is
// forced into a valid policy, to reproduce the call errors it causes.
func cePolicy(t *testing.T, name, template string) *Policy {
	t.Helper()
	limits := []Limit{perHour("hourly", 1_000_000), {Name: "minute", Requests: 100_000, Period: time.Minute}}
	c := Spec{Namespace: "test", Name: fmt.Sprintf("%s-%d", name, time.Now().UnixNano()),
		Algorithm: TokenBucket, Limits: limits, StateKey: template, TTL: Horizon(TokenBucket, limits), FailureMode: FailClosed}
	p, err := NewPolicy(c)
	if err == nil {
		return p
	}
	c.StateKey = "{forced:${identity}}:${limit}"
	if p, err = NewPolicy(c); err != nil {
		t.Fatalf("NewPolicy %s: %v", template, err)
	}
	p.StateKey, p.state = template, keylayout.MustParse(template, stateVars...)
	return p
}

// ceClusterClient is a cluster client as redisconn builds it (context deadlines, no retries,
// the default 60 s periodic reload so any reload in a test is one the limiter asked for).
func ceClusterClient(t *testing.T, c *redistest.Cluster, user, password string) *redis.ClusterClient {
	t.Helper()
	opts := c.ClusterOptions()
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	opts.Username, opts.Password = user, password
	cc := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// ceSameNode returns an identity whose good-policy keys live on the primary serving key.
func ceSameNode(t *testing.T, c *redistest.Cluster, good *Policy, key string) string {
	t.Helper()
	i := slices.Index(c.Primaries(), c.PrimaryForKey(t, key))
	if i < 0 {
		t.Fatalf("key %q is served by a node that was not started as a primary", key)
	}
	return cfIdentities(good, "good", 1, cfPrimarySlots(i))[0]
}

// ceClusterCrossSlot: the template passes today's validation, but an empty identity expands
// its tag to {}, which Redis ignores: the two limits' keys hash whole and land on two slots.
func ceClusterCrossSlot(t *testing.T, o Options) *ceCase {
	cluster := startClusterT(t)
	bad := cePolicy(t, "crossslot", "{${identity}}:${limit}")
	keys := bad.Keys("", "")
	if keylayout.Slot(keys[0]) == keylayout.Slot(keys[1]) {
		t.Fatalf("keys %q share a slot: the case would not cross slots", keys)
	}
	good := cePolicy(t, "good", testTemplate)
	return &ceCase{bad: bad, good: good, badID: "", goodID: ceSameNode(t, cluster, good, keys[0]), want: "CROSSSLOT",
		limiter: newLimiter(t, ceClusterClient(t, cluster, "", ""), o), nodes: cluster.Primaries()}
}

// ceClusterNoPerm: the bad policy's keys are outside the ACL user's key pattern.
func ceClusterNoPerm(t *testing.T, o Options) *ceCase {
	redistest.RequireRedis(t)
	cluster := redistest.StartCluster(t, 3, redistest.WithNodeOptions(redistest.WithArgs(ceACLArgs...)))
	bad := cePolicy(t, "noperm", "{other:${identity}}:${limit}")
	good := cePolicy(t, "good", testTemplate)
	return &ceCase{bad: bad, good: good, badID: "alice",
		goodID: ceSameNode(t, cluster, good, bad.Keys("alice", "")[0]), want: "NOPERM",
		limiter: newLimiter(t, ceClusterClient(t, cluster, ceUser, cePassword), o), nodes: cluster.Primaries()}
}

// ceStandaloneNoPerm: as ceClusterNoPerm on one server, whose single breaker is everyone's.
func ceStandaloneNoPerm(t *testing.T, o Options) *ceCase {
	srv := redistest.StartServer(t, redistest.WithArgs(ceACLArgs...))
	opts := srv.Options()
	opts.Username, opts.Password = ceUser, cePassword
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return &ceCase{bad: cePolicy(t, "noperm", "{other:${identity}}:${limit}"), good: cePolicy(t, "good", testTemplate),
		badID: "alice", goodID: "bob", want: "NOPERM", limiter: newLimiter(t, rdb, o)}
}

// TestOverloadIsNoNodeFault: a full pipeline queue (ErrOverloaded) is decided in this process
// and says nothing about the node that serves the refused checks. On Cluster, with one
// pipeline worker held up by a stalled primary A, checks for a healthy primary B are refused
// for the full queue; B's breaker must stay closed, so B's next check is decided by Redis
// (the breaker's cooldown is 10 s: an open breaker would refuse it).
func TestOverloadIsNoNodeFault(t *testing.T) {
	cluster := startClusterT(t)
	l := newLimiter(t, ceClusterClient(t, cluster, "", ""), Options{Pipelining: true, Workers: 1, MaxBatch: 1,
		Timeout: time.Second, BreakerCooldown: 10 * time.Second})
	p := cePolicy(t, "overload", testTemplate)
	stalled := cfIdentities(p, "a", 1, cfPrimarySlots(0))[0]
	healthy := cfIdentities(p, "b", 1, cfPrimarySlots(1))[0]
	mustCheck(t, l, p, Request{Identity: stalled})
	mustCheck(t, l, p, Request{Identity: healthy})
	if err := cluster.Primaries()[0].Client().Do(context.Background(), "CLIENT", "PAUSE", 1500, "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	batches, _ := l.PipelineStats()
	var wg sync.WaitGroup
	wg.Go(func() { l.Check(context.Background(), p, Request{Identity: stalled}) }) // holds the only worker
	if _, err := waitFor(5*time.Second, time.Millisecond, func() error {
		if n, _ := l.PipelineStats(); n == batches {
			return errors.New("no new pipeline batch")
		}
		return nil
	}); err != nil {
		t.Fatalf("the stalled check never reached the worker: %v", err)
	}
	var overloaded int
	var mu sync.Mutex
	for range 20 {
		wg.Go(func() {
			if d := l.Check(context.Background(), p, Request{Identity: healthy}); errors.Is(d.Err, ErrOverloaded) {
				mu.Lock()
				overloaded++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("20 checks for the healthy primary while the worker waited on the stalled one: %d refused for a full queue", overloaded)
	if overloaded < 5 {
		t.Fatalf("only %d checks found the queue full: the case did not overload", overloaded)
	}
	if d := l.Check(context.Background(), p, Request{Identity: healthy}); d.Source != SourceRedis {
		t.Fatalf("the healthy primary's next check: %+v; a full queue opened its breaker", d)
	}
}
