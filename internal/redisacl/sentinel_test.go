package redisacl_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestSentinelUsers: with a Sentinel-managed primary and replica (both including the
// administrative user), a user reaches both nodes, a sidecar reaching Redis through the
// Sentinel decides as that user, and after a failover (SENTINEL FAILOVER) the promoted
// replica decides for it at once; Repair then finds the nodes through the Sentinel again
// (primary and replica swapped) and sets a user lost by the new replica's restart.
func TestSentinelUsers(t *testing.T) {
	redistest.RequireRedis(t)
	primary := redistest.StartServer(t, adminConf(t, nil))
	replica := redistest.StartReplica(t, primary, adminConf(t, nil))
	sentinel := redistest.StartSentinel(t, masterName, primary)
	u, _ := adminUsers(t, redisconn.ModeSentinel, []string{sentinel.Addr()})
	ctx := testCtx(t)
	pa := password(t)
	a := tenant(t, "a", false, pa)
	ensure(ctx, t, u, a)
	nodes := []*redistest.Server{primary, replica}
	if got := holders(ctx, t, nodes, a); len(got) != 2 {
		t.Fatalf("%s is on %v; want the primary and the replica", a.Name, got)
	}
	sidecar := client(t, redisconn.ModeSentinel, []string{sentinel.Addr()}, a.Name, pa)
	if errs := checkAll(ctx, sidecar, "a", primary.Client()); len(errs) > 0 {
		t.Fatalf("a's checks through the Sentinel: %v", errs)
	}
	l := newLimiter(t, sidecar)
	p := roomyPolicy(t, "a")

	sc := sentinel.Client()
	defer func() { _ = sc.Close() }()
	if err := sc.Failover(ctx, masterName).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	promoted := waitPromoted(t, replica)
	waitNamed(ctx, t, sentinel, replica)
	recovered, aclErrs := untilRedis(ctx, l, p, "caller")
	if recovered.IsZero() || len(aclErrs) > 0 {
		t.Fatalf("a's sidecar after the failover: recovered at %v, ACL errors %v", recovered, aclErrs)
	}
	t.Logf("replica promoted; a decided by Redis again %s later", recovered.Sub(promoted).Round(time.Millisecond))

	primary.Restart(t) // the old primary, now to be a replica: back without users
	waitRepairedOn(ctx, t, u, []*redistest.Server{replica, primary}, a)
	if refused := redistest.ACLRefusals(ctx, t, adminUser, replica, primary); len(refused) > 0 {
		t.Errorf("Redis refused the administrative user: %v", refused)
	}
}

// waitNamed waits until the Sentinel names n as the primary.
func waitNamed(ctx context.Context, t *testing.T, s *redistest.Sentinel, n *redistest.Server) {
	t.Helper()
	sc := s.Client()
	defer func() { _ = sc.Close() }()
	wait.Eventually(t, 30*time.Second, "the Sentinel names "+n.Addr()+" as the primary", func() error {
		addr, err := sc.GetMasterAddrByName(ctx, masterName).Result()
		if err == nil && (len(addr) != 2 || addr[0]+":"+addr[1] != n.Addr()) {
			return fmt.Errorf("it names %v", addr)
		}
		return err
	})
}

// waitRepairedOn runs Repair until every node holds the users (a restarted replica is
// listed by the Sentinel once it is connected again), bounded.
func waitRepairedOn(ctx context.Context, t *testing.T, u *redisacl.Users, nodes []*redistest.Server, want ...redisacl.User) {
	t.Helper()
	repairUntilHeld(ctx, t, u, nodes, 45*time.Second, want...)
}
