package redismemory_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redisclient"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	aclConfPath    = "../../config/redis/acl.conf"
	adminUser      = "ratelimit-admin"
	adminPassword  = "admin-pa55-memory"
	sharedUser     = "ratelimit"
	sharedPassword = "shared-pa55-memory"
	tenantPrefix   = "ratelimit-ns-"
	// maxRounds bounds the rounds a test waits for SCAN cycles: each round is one step of
	// every primary, so a cycle of the few keys a test writes takes a handful.
	maxRounds = 10_000
)

// withUsers makes a server include config/redis/acl.conf's administrative and shared users.
func withUsers(t testing.TB) redistest.Option {
	t.Helper()
	return redistest.WithACLConf(t, aclConfPath, map[string]redistest.ACLUser{
		adminUser: {Password: adminPassword}, sharedUser: {Password: sharedPassword}})
}

// server is a redis-server with the operator's users and the extra arguments.
func server(t testing.TB, args ...string) *redistest.Server {
	t.Helper()
	return redistest.StartServer(t, withUsers(t), redistest.WithArgs(args...))
}

// connect reaches addrs in mode as user, as cmd/manager does (redisclient.As).
func connect(t testing.TB, mode redisconn.Mode, addrs []string, user, password string) (redis.UniversalClient, redisacl.Nodes) {
	t.Helper()
	return redisclient.As(t, mode, addrs, user, password)
}

// monitor is a monitor of nodes as the manager runs it, sampling count keys a step; tests
// drive its rounds themselves.
func monitor(t testing.TB, nodes redisacl.Nodes, count int64) *redismemory.Monitor {
	t.Helper()
	return &redismemory.Monitor{Nodes: nodes, ScanCount: count, TenantUserPrefix: tenantPrefix, Log: testr.NewWithInterface(t, testr.Options{})}
}

// standalone is a server with args, and a monitor of it as the administrative user.
func standalone(t testing.TB, args ...string) (*redistest.Server, *redismemory.Monitor) {
	t.Helper()
	return standaloneOn(t, server(t, args...))
}

// standaloneOn is a monitor of srv as the administrative user.
func standaloneOn(t testing.TB, srv *redistest.Server) (*redistest.Server, *redismemory.Monitor) {
	t.Helper()
	_, nodes := connect(t, redisconn.ModeStandalone, []string{srv.Addr()}, adminUser, adminPassword)
	return srv, monitor(t, nodes, 100)
}

func testCtx(t testing.TB) context.Context { return wait.Context(t, 2*time.Minute) }

// check runs one round that reads the settings and returns the report.
func check(ctx context.Context, t testing.TB, m *redismemory.Monitor) *redismemory.Report {
	t.Helper()
	m.Round(ctx, true)
	return m.Report()
}

// fullCycle runs rounds until every primary has completed a SCAN cycle that began after the
// call (so it saw every key written before), and returns the report.
func fullCycle(ctx context.Context, t testing.TB, m *redismemory.Monitor) *redismemory.Report {
	t.Helper()
	r := check(ctx, t, m)
	base := map[string]int64{}
	for _, n := range r.Nodes {
		if n.Primary {
			base[n.Addr] = r.Cycles[n.Addr]
		}
	}
	if len(base) == 0 {
		t.Fatalf("no primary among %v", r.Nodes)
	}
	for range maxRounds {
		r = m.Report()
		done := true
		for addr, n := range base {
			done = done && r.Cycles[addr] >= n+2
		}
		if done {
			return r
		}
		m.Round(ctx, false)
	}
	t.Fatalf("no complete SCAN cycle in %d rounds: %v", maxRounds, r.Cycles)
	return nil
}

// findings are every finding of the report's nodes, each once, in NodeFindings' order.
func findings(r *redismemory.Report) []redismemory.Finding {
	var out []redismemory.Finding
	for _, f := range redismemory.NodeFindings {
		for _, n := range r.Nodes {
			if n.Err == nil && slices.Contains(n.Findings(), f) && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}
