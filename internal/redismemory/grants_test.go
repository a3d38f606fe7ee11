package redismemory_test

import (
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestSharedUserIsUnknown: a manager holding only the sidecars' shared user (the default
// install, without tenant users) may not read the settings: its policies say Unknown,
// naming the ACL rules it lacks, and claim nothing else. Redis refused only what the
// monitor tried.
func TestSharedUserIsUnknown(t *testing.T) {
	t.Parallel()
	srv := server(t, "--maxmemory-policy", "allkeys-lru")
	_, nodes := connect(t, redisconn.ModeStandalone, []string{srv.Addr()}, sharedUser, sharedPassword)
	m := monitor(t, nodes, 100)
	r := check(testCtx(t), t, m)
	a := m.Assess("shop")
	if a.State != redismemory.Unknown || a.Reason != redismemory.ReasonMissingGrants ||
		!strings.Contains(a.Message, "lacks +config|get +info") || !strings.Contains(a.Message, srv.Addr()) {
		t.Errorf("assessment %+v; want Unknown, MissingGrants, naming +config|get +info and the node", a)
	}
	if len(r.Nodes) != 1 || r.Nodes[0].Err == nil {
		t.Errorf("nodes %+v; want one that could not be checked", r.Nodes)
	}
	for _, entry := range redistest.ACLRefusals(testCtx(t), t, sharedUser, srv) {
		if !strings.HasPrefix(entry, "command:config|get") && !strings.HasPrefix(entry, "command:info") &&
			!strings.HasPrefix(entry, "command:client|list") {
			t.Errorf("ACL LOG %q: the monitor sent something else", entry)
		}
	}
}

// TestAdminLeavesNoACLLog: as config/redis/acl.conf's administrative user, a check and a
// full sampling cycle over keys inside and outside the scopes leave nothing in ACL LOG.
func TestAdminLeavesNoACLLog(t *testing.T) {
	t.Parallel()
	srv, m := standalone(t, protectedArgs...)
	ctx := testCtx(t)
	for _, k := range []string{"{rl:shop/a}", "app:other", "{rl:bank/b}"} {
		if err := srv.Client().Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := fullCycle(ctx, t, m)
	if log := redistest.ACLRefusals(ctx, t, "", srv); len(log) > 0 {
		t.Errorf("ACL LOG %v; want nothing refused", log)
	}
	if a := m.Assess("shop"); a.State != redismemory.Exposed || a.Reason != string(redismemory.ForeignKeys) {
		t.Errorf("shop's assessment %+v; want its foreign key found", a)
	}
	if n := r.Nodes[0]; len(n.Missing) > 0 {
		t.Errorf("missing rules %v as the administrative user", n.Missing)
	}
}

// TestSamplingWithoutGrants: a user that may read the settings but not sample (no +scan)
// still has its counters assessed, and the message says what sampling lacks.
func TestSamplingWithoutGrants(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.WithArgs(protectedArgs...))
	ctx := testCtx(t)
	if err := srv.Client().Do(ctx, "ACL", "SETUSER", "settings-only", "on", ">pw", "resetchannels",
		"+config|get", "+info", "+client|list").Err(); err != nil {
		t.Fatal(err)
	}
	_, nodes := connect(t, redisconn.ModeStandalone, []string{srv.Addr()}, "settings-only", "pw")
	m := monitor(t, nodes, 100)
	check(ctx, t, m)
	a := m.Assess("shop")
	if a.State != redismemory.Protected || !strings.Contains(a.Message, "not sampled on "+srv.Addr()+": the manager's Redis user lacks +scan") {
		t.Errorf("assessment %+v; want Protected, saying sampling lacks +scan", a)
	}
}

// TestSharedUserOnCluster: on a Cluster, the shared user may not even list the nodes
// (CLUSTER NODES): Unknown, naming +cluster|nodes.
func TestSharedUserOnCluster(t *testing.T) {
	t.Parallel()
	redistest.RequireRedis(t)
	c := redistest.StartCluster(t, 3, redistest.WithNodeOptions(withUsers(t)))
	_, nodes := connect(t, redisconn.ModeCluster, c.Addrs(), sharedUser, sharedPassword)
	m := monitor(t, nodes, 100)
	check(testCtx(t), t, m)
	if a := m.Assess("shop"); a.State != redismemory.Unknown || a.Reason != redismemory.ReasonMissingGrants ||
		!strings.Contains(a.Message, "lacks +cluster|nodes on the Cluster") {
		t.Errorf("assessment %+v; want Unknown, MissingGrants, naming +cluster|nodes", a)
	}
}
