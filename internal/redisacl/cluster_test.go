package redisacl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// clusterOnly are the commands a namespace's user gets on Cluster only.
var clusterOnly = []string{"cluster|slots", "command"}

// TestClusterUsers runs on one 3-primary Cluster with a replica per primary, every node
// including acl.conf's administrative user: users reach every node, replicas included; a
// namespace's checks pass as its user and its Cluster-only grants are needed; so is the
// administrative user's; a killed primary's promoted replica serves the namespace's
// sidecar with its own user (a user set on primaries only is locked out there); a restarted
// node gets the users back from Repair; Delete removes a user from every node.
func TestClusterUsers(t *testing.T) {
	redistest.RequireRedis(t)
	cl := redistest.StartCluster(t, 3, redistest.WithReplicas(1), redistest.WithNodeOptions(adminConf(t, nil)))
	u, _ := adminUsers(t, redisconn.ModeCluster, cl.Addrs()[:1])
	ctx := testCtx(t)
	pa, pb := password(t), password(t)
	a, b := tenant(t, "a", true, pa), tenant(t, "b", true, pb)
	for _, user := range []redisacl.User{a, b} {
		ensure(ctx, t, u, user)
		if got := holders(ctx, t, cl.Nodes(), user); len(got) != len(cl.Nodes()) {
			t.Fatalf("%s is on %v; want every one of the %d nodes", user.Name, got, len(cl.Nodes()))
		}
	}
	t.Run("own checks", func(t *testing.T) {
		ca := client(t, redisconn.ModeCluster, cl.Addrs()[:1], a.Name, pa)
		if errs := exercise(ctx, ca, "a", cl.Client(), cl.Primaries()...); len(errs) > 0 {
			t.Fatalf("a's checks on Cluster: %v", errors.Join(errs...))
		}
		if log := redistest.ACLRefusals(ctx, t, "", cl.Nodes()...); len(log) > 0 {
			t.Fatalf("ACL LOG has refusals %v", log)
		}
	})
	t.Run("cluster grants", func(t *testing.T) { checkClusterGrants(ctx, t, cl, u) })
	for _, drop := range []string{"+cluster|slots", "+cluster|nodes", "+command"} {
		t.Run("admin without "+drop, func(t *testing.T) { checkAdminClusterGrant(ctx, t, cl, drop) })
	}
	t.Run("failover", func(t *testing.T) { checkFailover(ctx, t, cl, a, pa) })
	t.Run("restarted nodes repaired", func(t *testing.T) {
		cl.Primaries()[0].Restart(t) // killed by the failover: back as a replica, without users
		cl.Replicas()[1].Restart(t)
		waitRepaired(ctx, t, cl, u, a, b)
	})
	t.Run("delete from every node", func(t *testing.T) {
		if err := u.Delete(ctx, a.Name); err != nil {
			t.Fatal(err)
		}
		for _, n := range cl.Nodes() {
			if n.PasswordHashes(ctx, t, a.Name) != nil {
				t.Errorf("%s still holds %s", n.Addr(), a.Name)
			}
		}
		if got := holders(ctx, t, cl.Nodes(), b); len(got) != len(cl.Nodes()) {
			t.Errorf("%s is on %v after a's deletion; want every node", b.Name, got)
		}
	})
}

// checkClusterGrants shows each Cluster-only command of a namespace's user is needed.
func checkClusterGrants(ctx context.Context, t *testing.T, cl *redistest.Cluster, u *redisacl.Users) {
	for _, cmd := range clusterOnly {
		ns := "without-" + strings.ReplaceAll(cmd, "|", "-")
		p := password(t)
		user := tenant(t, ns, true, p)
		user.Commands = slices.DeleteFunc(slices.Clone(user.Commands), func(c string) bool { return c == cmd })
		ensure(ctx, t, u, user)
		resetACLLog(ctx, t, cl.Nodes()...)
		c := client(t, redisconn.ModeCluster, cl.Addrs()[:1], user.Name, p)
		errs := exercise(ctx, c, ns, cl.Client(), cl.Primaries()...)
		if log := redistest.ACLRefusals(ctx, t, "", cl.Nodes()...); !slices.Contains(log, "command:"+cmd) {
			t.Errorf("without +%s: ACL LOG %v (errors %v); want %s refused", cmd, log, errs, cmd)
		}
		if err := u.Delete(ctx, user.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// checkAdminClusterGrant runs the manager's work on the Cluster as the administrative user
// and as a copy of it without the grant drop (a Cluster-only one), which is refused.
func checkAdminClusterGrant(ctx context.Context, t *testing.T, cl *redistest.Cluster, drop string) {
	copyUser := "ratelimit-admin-without-" + strings.NewReplacer("+", "", "|", "-").Replace(drop)
	var rules []any
	for _, g := range adminGrants(t) {
		if g != drop {
			rules = append(rules, g)
		}
	}
	for _, n := range cl.Nodes() {
		args := append([]any{"ACL", "SETUSER", copyUser, "reset", "on", ">" + adminPassword, "resetchannels"}, rules...)
		if err := n.Client().Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, user := range []string{adminUser, copyUser} {
		resetACLLog(ctx, t, cl.Nodes()...)
		u, c := asUser(t, redisconn.ModeCluster, cl.Addrs()[:1], user, adminPassword)
		errs := managerWork(ctx, c, u, redistest.FlushScripts(cl.Primaries()...), deleteUsers(prefix+"work", cl.Nodes()[len(cl.Nodes())-1]),
			setKeys(cl.PrimaryForKey(t, "{rl:work/k}")))
		log := redistest.ACLRefusals(ctx, t, "", cl.Nodes()...)
		switch {
		case user == adminUser && (len(errs) > 0 || len(log) > 0):
			t.Errorf("manager work on Cluster as %s: errors %v, ACL LOG %v", user, errors.Join(errs...), log)
		case user == copyUser && !slices.Contains(log, "command:"+strings.TrimPrefix(drop, "+")):
			t.Errorf("without %s: ACL LOG %v (errors %v); want it refused", drop, log, errs)
		}
	}
}

// nodeList are some nodes only: the control of a user set on primaries alone.
type nodeList []*redis.Client

func (l nodeList) ForEach(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	var errs []error
	for _, c := range l {
		errs = append(errs, fn(ctx, c))
	}
	return errors.Join(errs...)
}

// failoverBound is how long after its replica's promotion a killed primary's identities
// must be decided by Redis again (the client reloads the slot map every 2 s).
const failoverBound = 20 * time.Second

// checkFailover kills primary 0 and waits for its replica's promotion: a's sidecar decides
// that shard's identity with Redis again, as a; user c, set on primaries only (the
// operator's Nodes include replicas), is refused there with WRONGPASS.
func checkFailover(ctx context.Context, t *testing.T, cl *redistest.Cluster, a redisacl.User, pa string) {
	primaries := cl.Primaries()
	only := nodeList{}
	for _, p := range primaries {
		only = append(only, p.Client())
	}
	pc := password(t)
	c := tenant(t, "c", true, pc)
	ensure(ctx, t, &redisacl.Users{Nodes: only, Prefix: prefix}, c)
	la := newLimiter(t, client(t, redisconn.ModeCluster, cl.Addrs()[1:2], a.Name, pa))
	lc := newLimiter(t, client(t, redisconn.ModeCluster, cl.Addrs()[1:2], c.Name, pc))
	pol := map[string]*limiter.Policy{"a": roomyPolicy(t, "a"), "c": roomyPolicy(t, "c")}
	id := map[string]string{"a": identityOn(t, pol["a"], 0, len(primaries)), "c": identityOn(t, pol["c"], 0, len(primaries))}
	for ns, l := range map[string]*limiter.Limiter{"a": la, "c": lc} {
		if d := l.Check(ctx, pol[ns], limiter.Request{Identity: id[ns]}); d.Source != limiter.SourceRedis {
			t.Fatalf("%s before the kill: %+v", ns, d)
		}
	}
	primaries[0].Kill()
	promoted := waitPromoted(t, cl.Replicas()[0])
	recovered, aclErrs := untilRedis(ctx, la, pol["a"], id["a"])
	if recovered.IsZero() || len(aclErrs) > 0 {
		t.Fatalf("a's sidecar after the promotion: recovered at %v, ACL errors %v; want Redis deciding within %s with its own user",
			recovered, aclErrs, failoverBound)
	}
	t.Logf("replica promoted; a decided by Redis again %s later", recovered.Sub(promoted).Round(time.Millisecond))
	wrongpass := false
	for deadline := time.Now().Add(failoverBound); time.Now().Before(deadline) && !wrongpass; time.Sleep(100 * time.Millisecond) {
		d := lc.Check(ctx, pol["c"], limiter.Request{Identity: id["c"]})
		if d.Source == limiter.SourceRedis {
			t.Fatalf("c, whose user is on primaries only, decided by the promoted replica: the control proves nothing")
		}
		wrongpass = d.Err != nil && strings.Contains(d.Err.Error(), "WRONGPASS")
	}
	if !wrongpass {
		t.Fatal("c's sidecar never got WRONGPASS from the promoted replica")
	}
	if err := (&redisacl.Users{Nodes: only[1:], Prefix: prefix}).Delete(ctx, c.Name); err != nil {
		t.Fatal(err)
	}
}

// untilRedis checks id every 50 ms until Redis decides, for at most failoverBound, and
// returns when it did (zero if never) with every ACL refusal seen meanwhile.
func untilRedis(ctx context.Context, l *limiter.Limiter, p *limiter.Policy, id string) (time.Time, []string) {
	var aclErrs []string
	for deadline := time.Now().Add(failoverBound); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		d := l.Check(ctx, p, limiter.Request{Identity: id})
		if d.Source == limiter.SourceRedis {
			return time.Now(), aclErrs
		}
		if d.Err != nil && (refusedByACL(d.Err) || strings.Contains(d.Err.Error(), "WRONGPASS")) {
			aclErrs = append(aclErrs, d.Err.Error())
		}
	}
	return time.Time{}, aclErrs
}

// waitRepaired runs Repair until every node holds the users as wanted (a restarted node
// rejoins the slot map within a few seconds), bounded, and checks Repair set them again on
// the two restarted nodes.
func waitRepaired(ctx context.Context, t *testing.T, cl *redistest.Cluster, u *redisacl.Users, want ...redisacl.User) {
	t.Helper()
	applied := repairUntilHeld(ctx, t, u, cl.Nodes(), 30*time.Second, want...)
	t.Logf("Repair set %d users again on the restarted nodes", applied)
	if applied < 2*len(want) {
		t.Errorf("Repair set %d users; two restarted nodes lacked %d each", applied, len(want))
	}
}

func newLimiter(t *testing.T, c redis.UniversalClient) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(c, limiter.Options{Timeout: time.Second, BreakerCooldown: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// roomyPolicy never denies within a test; it calls its script as a function, as a
// namespace's sidecar does.
func roomyPolicy(t *testing.T, ns string) *limiter.Policy {
	t.Helper()
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: ns, Name: "api", Algorithm: limiter.TokenBucket,
		Limits:   []limiter.Limit{{Name: "hour", Requests: 1_000_000, Period: time.Hour}},
		StateKey: "{rl:${namespace}/${policy}:${identity}}:${limit}", TTL: 2 * time.Hour, FailureMode: limiter.FailClosed,
		Functions: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// identityOn is an identity whose keys lie in primary i's share of the slots.
func identityOn(t *testing.T, p *limiter.Policy, i, primaries int) string {
	t.Helper()
	lo, hi := i*redistest.SlotCount/primaries, (i+1)*redistest.SlotCount/primaries-1
	for n := range 10000 {
		id := fmt.Sprintf("caller-%d", n)
		if s := int(keylayout.Slot(p.Keys(id, "")[0])); s >= lo && s <= hi {
			return id
		}
	}
	t.Fatalf("no identity in slots %d-%d", lo, hi)
	return ""
}

// waitPromoted waits until r says it is a primary, and returns when.
func waitPromoted(t *testing.T, r *redistest.Server) time.Time {
	t.Helper()
	wait.Eventually(t, 30*time.Second, "replica "+r.Addr()+" promoted", func() error {
		info, err := r.Client().Info(context.Background(), "replication").Result()
		if err == nil && !strings.Contains(info, "role:master") {
			return errors.New("not a primary")
		}
		return err
	})
	return time.Now()
}
