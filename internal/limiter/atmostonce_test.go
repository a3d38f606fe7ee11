package limiter

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/faultproxy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// At most once (issue 13, item 6; DESIGN.md): a script is sent at most once unless Redis said
// it did not run (NOSCRIPT, MOVED, ASK, TRYAGAIN). After a lost reply the failure mode
// answers, never a second EVALSHA. Every path that sends a script is driven through a fault
// proxy in front of real servers, with each fault: the connection dropped before the script
// reaches Redis, dropped after Redis ran it and replied, and the reply held back past the
// client's read timeout. Redis's own state then says how often the script ran: the policy's
// token bucket (no refill) shows the debits.

const (
	// amoBurst is the token bucket of every case; a clean check afterwards reports
	// amoBurst - 1 - debits as Remaining.
	amoBurst = 1000
	// amoReadTimeout is the clients' read timeout, shorter than the limiter's Timeout so that a
	// held-back reply times out the socket read while the check's context is still alive: the
	// moment a client that retries timeouts would send the script again.
	amoReadTimeout = 300 * time.Millisecond
	// amoTimeout is the limiter's Timeout.
	amoTimeout = time.Second
	// amoDelay is how long a Delay fault holds a reply back: past the read timeout.
	amoDelay = 1200 * time.Millisecond
)

// amoEnv is one topology behind fault proxies.
type amoEnv struct {
	name    string
	proxies *faultproxy.Set
	// client builds a fresh client whose connections pass through the proxies.
	client func(t *testing.T) redis.UniversalClient
	// direct is a limiter on a client without proxies, to read what Redis holds.
	direct *Limiter
	// owner returns the server (its address) serving key now.
	owner func(t *testing.T, key string) *redistest.Server
	// cluster is set on Redis Cluster.
	cluster *redistest.Cluster
	servers []*redistest.Server
}

// amoPath is one way a check reaches Redis.
type amoPath struct {
	name string
	// noScript flushes the owner's script cache first and breaks the EVAL fallback instead
	// of the EVALSHA.
	noScript bool
	// redirect moves the identity's slot to another primary behind the client's back first,
	// and breaks the script on the new owner (Cluster only).
	redirect bool
	// batch sends a companion check in the same pipeline, ahead of the broken one.
	batch bool
	// shared makes the companion and the broken check share one call (standalone only): the
	// call runs once or not at all, and the companion shares the broken check's fate.
	shared bool
	// run makes the check and returns the Err of its decision (nil when Redis decided).
	run func(t *testing.T, rdb redis.UniversalClient, p *Policy, identity, companion string) error
}

var amoPaths = []amoPath{
	{name: "check", run: amoCheck(false)},
	{name: "batch-of-one", run: amoCheck(true)},
	{name: "batch", batch: true, run: amoBatch},
	{name: "check-noscript", noScript: true, run: amoCheck(false)},
	{name: "batch-noscript", noScript: true, batch: true, run: amoBatch},
	{name: "check-redirected", redirect: true, run: amoCheck(false)},
	{name: "batch-of-one-redirected", redirect: true, run: amoCheck(true)},
	{name: "batch-redirected", redirect: true, batch: true, run: amoBatch},
	{name: "shared", batch: true, shared: true, run: amoShared},
	{name: "shared-noscript", noScript: true, batch: true, shared: true, run: amoShared},
}

// TestScriptSentAtMostOnce: on standalone (a client as redisconn builds it, and one with
// go-redis's default of 3 retries) and on a 3-primary Cluster (node clients without retries,
// as redisconn builds them, and with 3), for every path and fault, the
// check is decided by its failure mode and the script ran once (zero times when the
// connection dropped before it reached Redis).
func TestScriptSentAtMostOnce(t *testing.T) {
	redistest.RequireRedis(t)
	for _, env := range []func(t *testing.T) *amoEnv{
		func(t *testing.T) *amoEnv { return amoStandalone(t, -1) },
		func(t *testing.T) *amoEnv { return amoStandalone(t, 0) },
		func(t *testing.T) *amoEnv { return amoCluster(t, -1) },
		func(t *testing.T) *amoEnv { return amoCluster(t, 3) },
	} {
		e := env(t)
		t.Run(e.name, func(t *testing.T) {
			for _, path := range amoPaths {
				if path.redirect && e.cluster == nil || path.shared && e.cluster != nil {
					continue
				}
				for _, action := range []faultproxy.Action{faultproxy.DropBefore, faultproxy.DropAfter, faultproxy.Delay} {
					t.Run(path.name+"/"+action.String(), func(t *testing.T) { amoCase(t, e, path, action) })
				}
			}
		})
	}
}

// amoCase runs one path under one fault and checks the decision and the debits.
func amoCase(t *testing.T, e *amoEnv, path amoPath, action faultproxy.Action) {
	p := cfPolicy(t, FailClosed, cfNoRefill("burst", amoBurst))
	identity, companion := "victim", "companion"
	rdb := e.client(t)
	mustCheckOn(t, rdb, p, companion) // connections, slot map and script cache are warm
	if path.shared {                  // as the manager preloads every script
		if err := e.direct.rdb.ScriptLoad(context.Background(), p.script.shared.Source).Err(); err != nil {
			t.Fatal(err)
		}
	}
	key := p.Keys(identity, "")[0]
	target := e.owner(t, key)
	if e.cluster != nil {
		companion = amoSameNode(t, e, p, key)
	}
	if path.redirect {
		target = amoMoveSlot(t, e, key)
	}
	cmd := "EVALSHA"
	if path.noScript {
		cmd = "EVAL"
		if err := target.Client().ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH on %s: %v", target.Addr(), err)
		}
	}
	before := amoScriptRuns(t, e)
	e.proxies.Proxy(target.Addr()).Inject(faultproxy.Fault{Action: action, Commands: []string{cmd}, Arg: key, Count: 1,
		Delay: amoDelay})
	err := path.run(t, rdb, p, identity, companion)
	e.proxies.Clear()
	runs := amoScriptRuns(t, e) - before
	debits := amoBurst - 1 - mustCheck(t, e.direct, p, Request{Identity: identity}).Remaining
	want := int64(1)
	if action == faultproxy.DropBefore {
		want = 0
	}
	t.Logf("%s of %s on %s: decision error %v; the victim was debited %d times; scripts run on the servers: %d",
		action, cmd, target.Addr(), err, debits, runs)
	if err == nil {
		t.Errorf("the check was decided by Redis, want its failure mode: the client sent the script again after %s", action)
	}
	if debits != want {
		t.Errorf("the check debited %d times, want %d: the script was sent again after %s", debits, want, action)
	}
	if path.batch && !path.shared {
		want++ // the companion's
	}
	if runs != want {
		t.Errorf("INFO commandstats: %d script calls ran, want %d", runs, want)
	}
}

// amoCheck checks through Check, with pipelining (a lone check is a batch of one) or without.
func amoCheck(pipelining bool) func(*testing.T, redis.UniversalClient, *Policy, string, string) error {
	return func(t *testing.T, rdb redis.UniversalClient, p *Policy, identity, _ string) error {
		l := newLimiter(t, rdb, Options{Timeout: amoTimeout, Pipelining: pipelining})
		d := l.Check(context.Background(), p, Request{Identity: identity})
		if d.Source != SourceRedis && d.Source != SourceFailClosed {
			t.Fatalf("decision from %s", d.Source)
		}
		return d.Err
	}
}

// amoBatch sends the check in one pipeline together with a companion check on the same node,
// as a pipeline worker does.
func amoBatch(t *testing.T, rdb redis.UniversalClient, p *Policy, identity, companion string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), amoTimeout)
	defer cancel()
	victim := newCall(p.script, p.Keys(identity, ""), p.Args(Request{Cost: 1}))
	other := newCall(p.script, p.Keys(companion, ""), p.Args(Request{Cost: 1}))
	evalBatch(ctx, rdb, []*call{other, victim})
	<-other.done
	res := <-victim.done
	return res.err
}

// amoShared is amoBatch with the two checks in one shared call (shared.go), as a pipeline of
// a standalone Redis sends one policy's checks; the companion must fail with the victim.
func amoShared(t *testing.T, rdb redis.UniversalClient, p *Policy, identity, companion string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), amoTimeout)
	defer cancel()
	victim := newCall(p.script, p.Keys(identity, ""), p.Args(Request{Cost: 1}))
	other := newCall(p.script, p.Keys(companion, ""), p.Args(Request{Cost: 1}))
	victim.policy, other.policy = p, p
	evalBatch(ctx, rdb, []*call{other, victim})
	if res := <-other.done; res.err == nil {
		t.Errorf("the companion sharing the broken call was answered by Redis: %v", res.val)
	}
	res := <-victim.done
	return res.err
}

// mustCheckOn makes one check through rdb that Redis must decide.
func mustCheckOn(t *testing.T, rdb redis.UniversalClient, p *Policy, identity string) {
	t.Helper()
	l := newLimiter(t, rdb, Options{Timeout: amoTimeout})
	mustCheck(t, l, p, Request{Identity: identity})
}

// amoScriptRuns is how many script calls the servers have run to completion (INFO
// commandstats: calls minus failed calls, such as NOSCRIPT, of EVALSHA and EVAL).
func amoScriptRuns(t *testing.T, e *amoEnv) int64 {
	t.Helper()
	var n int64
	for _, s := range e.servers {
		info, err := s.Client().Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatalf("INFO commandstats on %s: %v", s.Addr(), err)
		}
		for _, cmd := range []string{"evalsha", "eval"} {
			n += commandCalls(t, info, cmd) - commandField(t, info, cmd, "failed_calls")
		}
	}
	return n
}

// amoStandalone is one server behind a proxy; its clients have the options redisconn gives
// (context deadlines) with maxRetries, the test's read timeout and the proxy's dialer.
func amoStandalone(t *testing.T, maxRetries int) *amoEnv {
	srv := redistest.StartServer(t)
	proxies := faultproxy.StartSet(t, srv.Addr())
	name := "standalone/MaxRetries=-1"
	if maxRetries == 0 {
		name = "standalone/go-redis-default-retries"
	}
	amoPreload(t, srv)
	return &amoEnv{name: name, proxies: proxies, servers: []*redistest.Server{srv},
		client: func(t *testing.T) redis.UniversalClient {
			opts := srv.Options()
			opts.Dialer, opts.MaxRetries, opts.ContextTimeoutEnabled = proxies.Dial, maxRetries, true
			opts.ReadTimeout = amoReadTimeout
			c := redis.NewClient(opts)
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		direct: amoDirect(t, srv.Client()),
		owner:  func(*testing.T, string) *redistest.Server { return srv },
	}
}

// amoCluster is a 3-primary Cluster, each primary behind a proxy; its clients have the
// options redisconn gives (context deadlines) with maxRetries for the node clients and the
// test's read timeout.
func amoCluster(t *testing.T, maxRetries int) *amoEnv {
	cluster := startClusterT(t)
	proxies := faultproxy.StartSet(t, cluster.Addrs()...)
	for _, s := range cluster.Primaries() {
		amoPreload(t, s)
	}
	return &amoEnv{name: fmt.Sprintf("cluster/MaxRetries=%d", maxRetries), proxies: proxies, servers: cluster.Primaries(),
		cluster: cluster,
		client: func(t *testing.T) redis.UniversalClient {
			opts := cluster.ClusterOptions()
			opts.Dialer, opts.MaxRetries, opts.ContextTimeoutEnabled = proxies.Dial, maxRetries, true
			opts.ReadTimeout = amoReadTimeout
			c := redis.NewClusterClient(opts)
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		direct: amoDirect(t, cluster.Client()),
		owner:  func(t *testing.T, key string) *redistest.Server { return cluster.PrimaryForKey(t, key) },
	}
}

// amoDirect is a limiter without proxies, for reading what Redis holds.
func amoDirect(t *testing.T, rdb redis.UniversalClient) *Limiter {
	return newLimiter(t, rdb, Options{Timeout: 5 * time.Second})
}

// amoPreload loads every script on s, so a fault on EVALSHA meets a cached script.
func amoPreload(t *testing.T, s *redistest.Server) {
	t.Helper()
	for _, sc := range Scripts() {
		if err := s.Client().ScriptLoad(context.Background(), sc.Source).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD on %s: %v", s.Addr(), err)
		}
	}
}

// amoSameNode returns an identity of p whose key is served by the same primary as key.
func amoSameNode(t *testing.T, e *amoEnv, p *Policy, key string) string {
	t.Helper()
	i := slices.Index(e.cluster.Primaries(), e.owner(t, key))
	return cfIdentities(p, "companion", 1, func(s uint16) bool {
		return cfPrimarySlots(i)(s) && s != keylayout.Slot(key)
	})[0]
}

// amoMoveSlot assigns key's slot (empty: the key was never written) to the next primary
// behind the client's back, and returns the new owner.
func amoMoveSlot(t *testing.T, e *amoEnv, key string) *redistest.Server {
	t.Helper()
	primaries := e.cluster.Primaries()
	src := e.owner(t, key)
	dst := primaries[(slices.Index(primaries, src)+1)%len(primaries)]
	cfMigrateSlot(t, keylayout.Slot(key), src, dst, primaries)
	if got := e.owner(t, key); got != dst {
		t.Fatalf("slot of %q still served by %s after moving it to %s", key, got.Addr(), dst.Addr())
	}
	return dst
}
