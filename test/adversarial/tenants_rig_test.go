package adversarial

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts/loader"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// The tenant rig (issue 25): one redis-server shared by namespaces as a platform runs it
// with --redis-tenant-users. The manager's part is done by the project's own code as the
// manager does it: the administrative user of config/redis/acl.conf, one ACL user per
// namespace made by redisacl with TenantCommands, the scripts loaded as functions by the
// script loader (internal/scripts/loader). Redis runs with the memory settings the Security model asks
// for (a maxmemory with noeviction, maxmemory-clients), plus a short busy-reply-threshold
// so that a stalled server shows at once. The victim namespace is shop (the rig of
// rig_test.go); the attacker holds only its own namespace's credentials.

const (
	attackerNS    = "attacker"
	adminName     = "ratelimit-admin"
	adminPassword = "admin-password-of-the-tenant-rig"
	userPrefix    = "ratelimit-ns-"
)

// tenantRedisArgs are the redis.conf settings of a Redis shared by tenants (docs/operations.md),
// and a short busy-reply-threshold, so that a stalled server shows at once.
var tenantRedisArgs = append(redistest.LimiterMemory("64mb", "8mb"), "--busy-reply-threshold", "100")

// tenantCommands are what the manager grants a namespace's user, with every optional grant
// (Cluster's CLUSTER SLOTS and COMMAND, SELECT), so that the attacks try them all.
var tenantCommands = redisacl.TenantCommands(true, 1, false)

// tenants is the shared Redis, as its operator and the manager set it up.
type tenants struct {
	t         *testing.T
	srv       *redistest.Server
	passwords map[string]string
}

// newTenants starts the shared Redis and gives each namespace its user, as the manager does.
func newTenants(t *testing.T, namespaces ...string) *tenants {
	t.Helper()
	redistest.RequireRedis(t)
	acl := redistest.WithACLConf(t, filepath.Join(kube.RepoRoot(), "config", "redis", "acl.conf"),
		map[string]redistest.ACLUser{adminName: {Password: adminPassword}})
	ts := &tenants{t: t, srv: redistest.StartServer(t, acl, redistest.WithArgs(tenantRedisArgs...)), passwords: map[string]string{}}
	admin := ts.as(adminName, adminPassword)
	users := &redisacl.Users{Nodes: redisacl.ServerNodes(admin.(*redis.Client)), Prefix: userPrefix} //nolint:forcetypeassert // standalone
	ctx := context.Background()
	for _, ns := range namespaces {
		password, err := redisacl.NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		user, err := redisacl.TenantUser(userPrefix, "", ns, tenantCommands, []string{redisacl.HashPassword(password)})
		if err != nil {
			t.Fatal(err)
		}
		if err := users.Ensure(ctx, user); err != nil {
			t.Fatalf("user of %s: %v", ns, err)
		}
		ts.passwords[ns] = password
	}
	scriptLoader := &loader.ScriptLoader{Client: admin, Functions: true, Log: logr.Discard()}
	if err := scriptLoader.Ensure(ctx); err != nil {
		t.Fatalf("load the functions as %s: %v", adminName, err)
	}
	return ts
}

// as is a client of the shared Redis as user, built as redisconn builds the sidecars'.
func (ts *tenants) as(user, password string) redis.UniversalClient {
	ts.t.Helper()
	c, err := redisconn.NewClient(redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{ts.srv.Addr()},
		CredentialsPath: redistest.CredentialsDir(ts.t, user, password)})
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { _ = c.Close() })
	return c
}

// of is a client with namespace ns's credentials: what anyone holding its Secret has.
func (ts *tenants) of(ns string) redis.UniversalClient {
	ts.t.Helper()
	return ts.as(userPrefix+ns, ts.passwords[ns])
}

// sidecar is namespace shop's sidecar on its own credentials, enforcing policies; Timeout
// is the production 50ms raised for a loaded machine, but short enough that a stalled
// Redis shows as failure-mode decisions.
func (ts *tenants) sidecar(policies ...*v1alpha1.RateLimitPolicy) *rig {
	ts.t.Helper()
	topology := snapshot.Redis{Mode: "standalone", Addrs: []string{ts.srv.Addr()}, Functions: true}
	return newRigOn(ts.t, ts.of(ns), topology, limiter.Options{Timeout: 500 * time.Millisecond}, httpserver.DefaultLimits(), policies...)
}

// byRedis asks r's check API n times about identity of policy and returns how many of the
// answers Redis decided (the rest a failure mode answered).
func (r *rig) byRedis(t *testing.T, policy, identity string, n int) int {
	t.Helper()
	decided := 0
	for range n {
		if resp := r.checkAPI(t, checkwire.Request{Policy: policy, Identity: identity}); resp.Source == string(limiter.SourceRedis) {
			decided++
		}
	}
	return decided
}
