package adversarial

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/faultproxy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// Class: one policy's failing keys taking the node down for everyone (issue 13, item 5).
// The sidecar's Redis user may touch one policy's keys only (an ACL narrower than the
// policies, as after a hand-edited ACL), so every check of the other policy fails with
// NOPERM. After five such failures the node's breaker opened and every other policy went
// to its failure mode.
func TestOnePolicysFailingKeysAreNoOutage(t *testing.T) {
	srv := redistest.StartServer(t)
	if err := srv.Client().Do(context.Background(), "ACL", "SETUSER", "sidecar", "on", ">pw", "~{rl:"+ns+"/inside*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	o := srv.Options()
	o.Username, o.Password = "sidecar", "pw"
	rdb := sidecarClient(t, o)
	outside := newPolicy("outside", v1alpha1.AlgorithmGCRA, 1000, time.Hour, onPaths("/outside"))
	r := newRigOn(t, rdb, snapshottest.Standalone(srv.Addr()), limiter.Options{Pipelining: true}, httpserver.DefaultLimits(),
		outside, newPolicy("inside", v1alpha1.AlgorithmGCRA, 1000, time.Hour, onPaths("/inside")))
	if got := r.count(50, http.MethodGet, "/outside", "X-API-Key", "mallory"); got != 0 {
		t.Fatalf("the failing policy (FailClosed): %d of 50 forwarded, want 0", got)
	}
	for i := range 10 {
		if resp := r.checkAPI(t, checkwire.Request{Policy: "inside", Identity: "alice"}); resp.Source != string(limiter.SourceRedis) || !resp.Allowed {
			t.Fatalf("check %d of another policy on the same node after 50 NOPERMs: %+v, want decided by Redis", i, resp)
		}
	}
}

// Class: a script sent twice after its reply was lost (issue 13, item 6). On Redis Cluster
// go-redis's redirect loop re-sent an EVALSHA after the connection dropped: one request was
// debited twice. The reply of the victim's check is dropped after Redis ran it: the failure
// mode answers, and Redis ran the script exactly once.
func TestLostReplyIsNeverResentOnCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	proxies := faultproxy.StartSet(t, cluster.Addrs()...)
	opts := cluster.ClusterOptions()
	opts.Dialer = proxies.Dial
	cc := sidecarClusterClient(t, opts)
	r := newRigOn(t, cc, snapshottest.Standalone(cluster.Addrs()[0]), limiter.Options{}, httpserver.DefaultLimits(),
		newPolicy("api", v1alpha1.AlgorithmGCRA, 1000, time.Hour))
	key := r.store.Current().Rule("api").Policy.Keys("victim", "")[0]
	// Load the scripts on every primary, as the controller does, so the victim's EVALSHA runs.
	if err := cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		for _, s := range limiter.Scripts() {
			if err := c.ScriptLoad(ctx, s.Source).Err(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range proxies.Proxies() {
		p.Inject(faultproxy.Fault{Action: faultproxy.DropAfter, Commands: []string{"evalsha", "eval"}, Arg: key, Count: 1})
	}
	if resp := r.checkAPI(t, checkwire.Request{Policy: "api", Identity: "victim"}); resp.Source == string(limiter.SourceRedis) {
		t.Fatalf("the check whose reply was lost: %+v, want answered by the failure mode", resp)
	}
	proxies.Clear()
	resp := r.checkAPI(t, checkwire.Request{Policy: "api", Identity: "victim"})
	if resp.Source != string(limiter.SourceRedis) || resp.Remaining != 1000-2 {
		t.Errorf("the next check: %+v; want decided by Redis with 998 left (the lost check debited once, not %d times)", resp, 1000-1-resp.Remaining)
	}
}

// Class: a breaker that never closes again (issue 13, item 7). When a failed primary came
// back at its old address, its shard's breaker kept probing a client go-redis had closed,
// and that shard's callers stayed on the failure mode for good. Here: the primary is killed,
// its replica promoted, and the old primary stays down until go-redis has dropped it from
// its slot map and closed its client (a minute: an outage of a few minutes is ordinary);
// then it is restarted and failed back. Within seconds the shard's callers are decided by
// Redis again. About 80 s, mostly waiting.
func TestShardRecoversAfterItsPrimaryFailsBack(t *testing.T) {
	cluster := redistest.StartCluster(t, 3, redistest.WithReplicas(1),
		redistest.WithNodeOptions(redistest.WithArgs("--cluster-node-timeout", "1000")))
	opts := cluster.ClusterOptions()
	opts.ClusterStateReloadInterval = 2 * time.Second
	cc := sidecarClusterClient(t, opts)
	r := newRigOn(t, cc, snapshottest.Standalone(cluster.Addrs()[0]), limiter.Options{Timeout: 200 * time.Millisecond}, httpserver.DefaultLimits(),
		newPolicy("api", v1alpha1.AlgorithmGCRA, 1_000_000, time.Hour))
	primary := cluster.Primaries()[0]
	id := identityOn(t, cluster, r, primary)
	old, err := cc.MasterForKey(context.Background(), r.store.Current().Rule("api").Policy.Keys(id, "")[0])
	if err != nil {
		t.Fatal(err)
	}
	// Traffic throughout, as in production: the shard's callers meet the dead primary and
	// open its breaker.
	stop := make(chan struct{})
	defer close(stop)
	go r.keepChecking(id, stop)
	primary.Kill()
	replica := cluster.Replicas()[0]
	waitRole(t, replica, "master", 20*time.Second)
	r.waitRedisDecides(t, id, "after the promotion", 15*time.Second)
	waitClosed(t, old, 90*time.Second)
	primary.Restart(t)
	waitRole(t, primary, "slave", 20*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for roleOf(primary) != "master" && time.Now().Before(deadline) {
		_ = primary.Client().Do(context.Background(), "CLUSTER", "FAILOVER").Err()
		time.Sleep(500 * time.Millisecond)
	}
	waitRole(t, primary, "master", time.Second)
	r.waitRedisDecides(t, id, "after the fail-back to the old address", 15*time.Second)
}

// identityOn finds an identity whose key the server primary serves.
func identityOn(t *testing.T, c *redistest.Cluster, r *rig, primary *redistest.Server) string {
	t.Helper()
	p := r.store.Current().Rule("api").Policy
	for i := range 10_000 {
		id := fmt.Sprintf("caller-%d", i)
		if c.PrimaryForKey(t, p.Keys(id, "")[0]) == primary {
			return id
		}
	}
	t.Fatal("no identity on the first primary in 10000 tries")
	return ""
}

// waitRedisDecides checks id every 50 ms until Redis decides it for a whole second.
func (r *rig) waitRedisDecides(t *testing.T, id, when string, within time.Duration) {
	t.Helper()
	e := r.store.Current().Rule("api")
	deadline := time.Now().Add(within)
	var since time.Time
	var last limiter.Decision
	for time.Now().Before(deadline) {
		o := r.engine.Decide(context.Background(), httpcheck.FrontName, e, engine.Check{Identity: id, HasIdentity: true, Cost: 1})
		last = o.Decision
		switch {
		case o.Decision.Source != limiter.SourceRedis:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= time.Second:
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: the shard's caller was not decided by Redis for a second within %s (last: %+v)", when, within, last)
}

// roleOf is the replication role a server reports ("master", "slave"), or "" if it does
// not answer.
func roleOf(s *redistest.Server) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := s.Client().Info(ctx, "replication").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v
		}
	}
	return ""
}

// waitRole waits until s reports role.
func waitRole(t *testing.T, s *redistest.Server, role string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for roleOf(s) != role {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %q after %s, want %q", s.Addr(), roleOf(s), within, role)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitClosed waits until go-redis has closed the node client c (it does so a minute after
// the node left the slot map).
func waitClosed(t *testing.T, c *redis.Client, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("go-redis did not close the dead primary's client within %s", within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// keepChecking checks id every 10 ms until stop is closed.
func (r *rig) keepChecking(id string, stop <-chan struct{}) {
	e := r.store.Current().Rule("api")
	for {
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		r.engine.Decide(context.Background(), httpcheck.FrontName, e, engine.Check{Identity: id, HasIdentity: true, Cost: 1})
	}
}
