package redisacl_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts/loader"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/limitercheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redisclient"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	aclConfPath   = "../../config/redis/acl.conf"
	adminUser     = "ratelimit-admin"
	adminPassword = "admin-pa55-for-tests"
	prefix        = "ratelimit-ns-"
	masterName    = "rl-primary"
)

// adminConf includes config/redis/acl.conf's administrative user, its rules passed through
// edit (nil keeps them). The default user stays as the harness needs it: the test's own
// view of the server (ACL LOG, canaries), never the operator's.
func adminConf(t testing.TB, edit func([]string) []string) redistest.Option {
	t.Helper()
	return redistest.WithACLConf(t, aclConfPath, map[string]redistest.ACLUser{
		adminUser: {Password: adminPassword, Edit: edit},
	})
}

// options are a redisconn client's (as the manager and the sidecars build theirs) reaching
// addrs in mode as user.
func options(t testing.TB, mode redisconn.Mode, addrs []string, user, password string) redisconn.Options {
	t.Helper()
	o := redisconn.Options{Mode: mode, Addrs: addrs, CredentialsPath: redistest.CredentialsDir(t, user, password)}
	if mode == redisconn.ModeSentinel {
		o.MasterName = masterName
	}
	return o
}

// client is a redisconn client reaching addrs in mode as user; closed when the test ends.
func client(t testing.TB, mode redisconn.Mode, addrs []string, user, password string) redis.UniversalClient {
	t.Helper()
	c, _ := redisclient.Connect(t, options(t, mode, addrs, user, password))
	return c
}

// adminUsers is the operator's user keeper as the manager builds it (cmd/manager), as the
// administrative user, with the client it reaches Redis through.
func adminUsers(t testing.TB, mode redisconn.Mode, addrs []string) (*redisacl.Users, redis.UniversalClient) {
	t.Helper()
	return asUser(t, mode, addrs, adminUser, adminPassword)
}

// standaloneAdmin is a fresh redis-server with the administrative user, and the user keeper
// reaching it as that user.
func standaloneAdmin(t *testing.T) (*redistest.Server, *redisacl.Users) {
	t.Helper()
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t, adminConf(t, nil))
	u, _ := adminUsers(t, redisconn.ModeStandalone, []string{srv.Addr()})
	return srv, u
}

// asUser is adminUsers as any user: the nodes are those the manager finds (redisacl.NodesOf).
func asUser(t testing.TB, mode redisconn.Mode, addrs []string, user, pass string) (*redisacl.Users, redis.UniversalClient) {
	t.Helper()
	c, nodes := redisclient.Connect(t, options(t, mode, addrs, user, pass))
	return &redisacl.Users{Nodes: nodes, Prefix: prefix}, c
}

// ensure sets user on every node u reaches (Users.Ensure), failing the test if it cannot.
func ensure(ctx context.Context, t testing.TB, u *redisacl.Users, user redisacl.User) {
	t.Helper()
	if err := u.Ensure(ctx, user); err != nil {
		t.Fatalf("Ensure %s: %v", user.Name, err)
	}
}

// tenants sets the standalone users of the namespaces through u, each with a fresh
// password, and returns the passwords by namespace.
func tenants(ctx context.Context, t testing.TB, u *redisacl.Users, namespaces ...string) map[string]string {
	t.Helper()
	pass := map[string]string{}
	for _, ns := range namespaces {
		pass[ns] = password(t)
		ensure(ctx, t, u, tenant(t, ns, false, pass[ns]))
	}
	return pass
}

// tenant is namespace ns's user accepting the passwords, as the operator builds it.
func tenant(t testing.TB, ns string, cluster bool, passwords ...string) redisacl.User {
	t.Helper()
	return redisclient.Tenant(t, prefix, ns, cluster, passwords...)
}

// password is a fresh generated password.
func password(t testing.TB) string {
	t.Helper()
	p, err := redisacl.NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testCtx bounds a test's calls to Redis.
func testCtx(t testing.TB) context.Context { return wait.Context(t, 2*time.Minute) }

// policyWithKeys is a one-request-per-hour policy of ns, idempotent, with the state and
// idempotency keys under tag, calling its script as a function (as a namespace's sidecar).
func policyWithKeys(t testing.TB, ns string, alg limiter.Algorithm, mode limiter.FailureMode, tag string) *limiter.Policy {
	t.Helper()
	p, err := limitercheck.Sidecar{NS: ns, Mode: mode, Functions: true}.Policy(alg, tag)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tenantSidecar is what a sidecar of ns with its own user runs: policies failing closed, their
// scripts called as the functions the manager loads.
func tenantSidecar(ns string) limitercheck.Sidecar {
	return limitercheck.Sidecar{NS: ns, Mode: limiter.FailClosed, Functions: true}
}

// algorithms are every algorithm the limiter runs.
var algorithms = limitercheck.Algorithms

// loadFunctions loads the limiter's functions on every primary c reaches, as the manager
// does in tenancy mode (here as whoever c authenticates as: the administrative user's
// grants are TestAdminACL's).
func loadFunctions(ctx context.Context, c redis.UniversalClient) error {
	return (&loader.ScriptLoader{Client: c, Functions: true, Log: logr.Discard()}).Ensure(ctx)
}

// checkAll makes a sidecar's checks of every algorithm (limitercheck) for policies of ns
// failing closed, once admin has loaded the functions, and returns every failure.
func checkAll(ctx context.Context, c redis.UniversalClient, ns string, admin redis.UniversalClient) []error {
	if err := loadFunctions(ctx, admin); err != nil {
		return []error{err}
	}
	return tenantSidecar(ns).All(ctx, c)
}

// exercise does what a sidecar of ns with its own user does with Redis (limitercheck), once
// admin has loaded the functions, and again after every script and function was flushed
// from primaries and loaded again (the manager's repair; the sidecar loads nothing).
func exercise(ctx context.Context, c redis.UniversalClient, ns string, admin redis.UniversalClient, primaries ...*redistest.Server) []error {
	if err := loadFunctions(ctx, admin); err != nil {
		return []error{err}
	}
	reload := func(ctx context.Context) error {
		if err := redistest.FlushFunctions(primaries...)(ctx); err != nil {
			return err
		}
		return loadFunctions(ctx, admin)
	}
	return tenantSidecar(ns).Exercise(ctx, c, reload)
}

// resetACLLog empties the nodes' ACL LOG.
func resetACLLog(ctx context.Context, t testing.TB, nodes ...*redistest.Server) {
	t.Helper()
	for _, n := range nodes {
		if err := n.Client().ACLLogReset(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// holders are the nodes holding user name with exactly the hashes of want's passwords.
func holders(ctx context.Context, t testing.TB, nodes []*redistest.Server, want redisacl.User) []string {
	t.Helper()
	hashes := slices.Sorted(slices.Values(want.PasswordHashes))
	var out []string
	for _, n := range nodes {
		if slices.Equal(n.PasswordHashes(ctx, t, want.Name), hashes) {
			out = append(out, n.Addr())
		}
	}
	return out
}

// repairUntilHeld runs Repair every 200 ms until every one of nodes holds the wanted users,
// failing the test after within; it returns how many users Repair set meanwhile. A round
// that fails (a node still joining, or listed down) is retried.
func repairUntilHeld(ctx context.Context, t testing.TB, u *redisacl.Users, nodes []*redistest.Server, within time.Duration, want ...redisacl.User) int {
	t.Helper()
	applied := 0
	if err := wait.Poll(within, 200*time.Millisecond, func() error {
		res, _ := u.Repair(ctx)
		applied += res.Applied
		var missing []string
		for _, user := range want {
			if got := holders(ctx, t, nodes, user); len(got) != len(nodes) {
				missing = append(missing, fmt.Sprintf("%s on %v", user.Name, got))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%v", missing)
		}
		return nil
	}); err != nil {
		t.Fatalf("users not on every node: %v", err)
	}
	return applied
}

// refusedByACL reports whether err is Redis refusing a command or key by ACL: NOPERM for a
// command sent, "ERR The user executing the script can't ..." for one a script called.
func refusedByACL(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "NOPERM") ||
		strings.Contains(err.Error(), "The user executing the script can't"))
}
