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

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/limitercheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redisclient"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestTenantEveryGrantIsNeeded drops each command of a namespace's user in turn (the
// standalone ones; the Cluster ones in TestClusterUsers) and shows a sidecar's work is then
// refused: the command list is minimal.
func TestTenantEveryGrantIsNeeded(t *testing.T) {
	t.Parallel()
	srv, u := standaloneAdmin(t)
	ctx := testCtx(t)
	for _, cmd := range redisacl.TenantCommands(false, 0, false) {
		ns := "without-" + strings.ReplaceAll(cmd, "|", "-")
		user, p := tenant(t, ns, false), password(t)
		user.PasswordHashes = []string{redisacl.HashPassword(p)}
		user.Commands = slices.DeleteFunc(slices.Clone(user.Commands), func(c string) bool { return c == cmd })
		ensure(ctx, t, u, user)
		resetACLLog(ctx, t, srv)
		errs := exercise(ctx, client(t, redisconn.ModeStandalone, []string{srv.Addr()}, user.Name, p), ns, srv.Client(), srv)
		if log := redistest.ACLRefusals(ctx, t, "", srv); !slices.Contains(log, "command:"+cmd) {
			t.Errorf("without +%s: ACL LOG has %v (errors: %v); want %s refused", cmd, log, errs, cmd)
		}
	}
}

// TestTenantSelect: a database other than 0 needs SELECT (go-redis selects it on each
// connection), which TenantCommands adds then.
func TestTenantSelect(t *testing.T) {
	t.Parallel()
	srv, u := standaloneAdmin(t)
	ctx := testCtx(t)
	p := password(t)
	user := tenant(t, "db1", false, p)
	ensure(ctx, t, u, user)
	o := options(t, redisconn.ModeStandalone, []string{srv.Addr()}, user.Name, p)
	o.DB = 1
	c, _ := redisclient.Connect(t, o)
	if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "select") {
		t.Fatalf("database 1 without SELECT: %v; want SELECT refused", err)
	}
	user.Commands = redisacl.TenantCommands(false, 1, false)
	ensure(ctx, t, u, user)
	if errs := exercise(ctx, c, "db1", srv.Client(), srv); len(errs) > 0 {
		t.Fatalf("database 1 with TenantCommands(false, 1, false): %v", errors.Join(errs...))
	}
}

// managerWork is what the manager does with Redis in tenancy mode, as its administrative
// user: load the scripts and functions on every primary (after flush emptied them), create a user on
// every node, read every node's users to repair one a node lost, delete it; and check
// every node's memory settings and sample every primary's keys (after seed wrote some). It
// returns every failure.
func managerWork(ctx context.Context, admin redis.UniversalClient, u *redisacl.Users, flush, lose, seed func(context.Context) error) []error {
	var errs []error
	if err := errors.Join(flush(ctx), seed(ctx)); err != nil {
		return []error{err}
	}
	if err := memoryWork(ctx, u.Nodes); err != nil {
		errs = append(errs, err)
	}
	if err := loadFunctions(ctx, admin); err != nil {
		errs = append(errs, fmt.Errorf("script loader: %w", err))
	}
	if err := usageWork(ctx, admin); err != nil {
		errs = append(errs, fmt.Errorf("usage API: %w", err))
	}
	user := redisacl.User{Name: prefix + "work", PasswordHashes: []string{redisacl.HashPassword("p")},
		KeyPatterns: []string{"{rl:work/*"}, Commands: []string{"ping"}}
	if err := u.Ensure(ctx, user); err != nil {
		errs = append(errs, fmt.Errorf("Ensure: %w", err))
	}
	if err := lose(ctx); err != nil {
		return append(errs, err)
	}
	if res, err := u.Repair(ctx); err != nil || res.Applied == 0 {
		errs = append(errs, fmt.Errorf("Repair: %+v, %w", res, err))
	}
	if err := u.Delete(ctx, user.Name); err != nil {
		errs = append(errs, fmt.Errorf("Delete: %w", err))
	}
	return errs
}

// usageWork is the usage API's work in tenancy mode: a caller's usage read with a peek
// through the read-only functions (FCALL_RO), the policy's callers listed (a SCAN step, and
// the keys Redis holds from INFO keyspace), and a
// caller's counters granted and reset through the adjustment functions (FCALL), for every
// algorithm.
func usageWork(ctx context.Context, admin redis.UniversalClient) error {
	l, err := limiter.New(admin, limiter.Options{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer l.Close()
	for _, alg := range algorithms {
		p, err := limitercheck.Sidecar{NS: "work", Mode: limiter.FailClosed, Functions: true}.Policy(alg, limitercheck.DefaultTag)
		if err != nil {
			return err
		}
		if pk := l.Peek(ctx, p, limiter.Request{Identity: "caller", Cost: 1}); pk.Source != limiter.SourceRedis || !pk.Allowed {
			return fmt.Errorf("%s: peek decided by %s (allowed %v): %w", alg, pk.Source, pk.Allowed, pk.Err)
		}
		if c, err := l.CallersStep(ctx, p, limiter.ScanPosition{}, 10); err != nil || len(c.Identities) != 0 {
			return fmt.Errorf("%s: callers %v: %w", alg, c.Identities, err)
		}
		if _, err := l.KeyCount(ctx); err != nil {
			return fmt.Errorf("%s: key count: %w", alg, err)
		}
		for _, a := range []limiter.Adjustment{{Op: limiter.OpGrant, Amount: 2}, {Op: limiter.OpReset}} {
			a.Identity, a.RequestID = "caller", fmt.Sprintf("%s-%s", alg, a.Op)
			if _, err := l.Adjust(ctx, p, a); err != nil {
				return fmt.Errorf("%s: %s: %w", alg, a.Op, err)
			}
		}
	}
	return nil
}

// memoryWork is the manager's Redis memory checks over nodes: every node's settings, its
// tenant users' connections, and a complete sampling cycle of every primary. It fails
// unless all of it was read.
func memoryWork(ctx context.Context, nodes redisacl.Nodes) error {
	m := &redismemory.Monitor{Nodes: nodes, ScanCount: 100, TenantUserPrefix: prefix}
	m.Round(ctx, true)
	for range 1000 {
		if sampledAll(m.Report()) {
			break
		}
		m.Round(ctx, false)
	}
	r := m.Report()
	var errs []error
	for _, n := range r.Nodes {
		if n.Err != nil || len(n.Missing) > 0 {
			errs = append(errs, fmt.Errorf("memory checks of %s: %w (missing %v)", n.Addr, n.Err, n.Missing))
		}
	}
	if !sampledAll(r) || r.Err != nil {
		errs = append(errs, fmt.Errorf("memory sampling did not complete: cycles %v, %w", r.Cycles, r.Err))
	}
	return errors.Join(errs...)
}

// sampledAll reports whether every primary of r completed a sampling cycle.
func sampledAll(r *redismemory.Report) bool {
	for _, n := range r.Nodes {
		if n.Primary && r.Cycles[n.Addr] == 0 {
			return false
		}
	}
	return len(r.Nodes) > 0
}

// setKeys writes keys on the servers, as the default user: data for the sampling to size.
func setKeys(servers ...*redistest.Server) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, s := range servers {
			// A key of the limiter's and one of another application's on the same server
			// (the same slot on a Cluster): the memory sampling reads both.
			for _, k := range []string{"{rl:work/k}", "app:session:{rl:work/k}"} {
				if err := s.Client().Set(ctx, k, "v", time.Hour).Err(); err != nil {
					return fmt.Errorf("%s: %w", s.Addr(), err)
				}
			}
		}
		return nil
	}
}

// deleteUsers deletes the named user on the nodes, as the default user (a node that lost it).
func deleteUsers(name string, nodes ...*redistest.Server) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, n := range nodes {
			if err := n.Client().Do(ctx, "ACL", "DELUSER", name).Err(); err != nil {
				return fmt.Errorf("%s: %w", n.Addr(), err)
			}
		}
		return nil
	}
}

// adminGrants are the rules that grant the administrative user of acl.conf something:
// its +command rules, then its key rules.
func adminGrants(t *testing.T) []string {
	t.Helper()
	grants := redistest.ACLGrants(t, aclConfPath, adminUser)
	if len(grants) == 0 {
		t.Fatalf("%s: the %s user grants nothing", aclConfPath, adminUser)
	}
	return append(grants, redistest.ACLKeyRules(t, aclConfPath, adminUser)...)
}

// refusedFor is the ACL LOG entry that shows grant was needed: its command refused, or for
// a key rule some key.
func refusedFor(log []string, grant string) bool {
	if strings.HasPrefix(grant, "+") {
		return slices.Contains(log, "command:"+strings.TrimPrefix(grant, "+"))
	}
	return slices.ContainsFunc(log, func(e string) bool { return strings.HasPrefix(e, "key:") })
}

// TestAdminACL: as config/redis/acl.conf's administrative user, everything the manager
// does in tenancy mode works and Redis refuses nothing; without any one of its standalone
// grants (the Cluster ones in TestClusterUsers), its key rules included, some of that work
// is refused. The user may read no value, delete no key, and write none outside the
// limiter's prefix.
func TestAdminACL(t *testing.T) {
	t.Parallel()
	for _, drop := range append([]string{""}, adminGrants(t)...) {
		if strings.HasPrefix(drop, "+cluster|") || drop == "+command" {
			continue // Cluster only: TestClusterUsers
		}
		t.Run("without "+drop, func(t *testing.T) {
			t.Parallel()
			redistest.RequireRedis(t)
			srv := redistest.StartServer(t, adminConf(t, func(rules []string) []string {
				return slices.DeleteFunc(rules, func(r string) bool { return r == drop })
			}))
			u, admin := adminUsers(t, redisconn.ModeStandalone, []string{srv.Addr()})
			ctx := testCtx(t)
			errs := managerWork(ctx, admin, u, redistest.FlushScripts(srv), deleteUsers(prefix+"work", srv), setKeys(srv))
			log := redistest.ACLRefusals(ctx, t, "", srv)
			switch {
			case drop == "" && (len(errs) > 0 || len(log) > 0):
				t.Fatalf("manager work as %s: errors %v, ACL LOG %v", adminUser, errors.Join(errs...), log)
			case drop != "" && !refusedFor(log, drop):
				t.Fatalf("without %s: ACL LOG %v (errors %v); want it refused", drop, log, errs)
			}
			if drop == "" {
				check := limiter.Scripts()[0].Function // a function that writes
				for _, cmd := range [][]any{{"GET", "{rl:work/k}"}, {"DUMP", "{rl:work/k}"}, {"SET", "k", "v"}, {"FLUSHALL"},
					{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}, {"KEYS", "*"}, {"DEL", "{rl:work/k}"},
					{"FCALL", check, 1, "other:k", "1", "60000", "0", "10", "60000000"}} {
					if err := admin.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
						t.Errorf("%v as %s: %v; want NOPERM", cmd, adminUser, err)
					}
				}
				// FCALL_RO, which the usage API needs, runs no function that may write.
				if err := admin.Do(ctx, "FCALL_RO", check, 1, "{rl:work/k}", "1", "60000", "0", "10", "60000000").Err(); err == nil ||
					!strings.Contains(err.Error(), "write") {
					t.Errorf("FCALL_RO of the check function %s as %s: %v; want it refused for its writes", check, adminUser, err)
				}
			}
		})
	}
}

// TestTenantAllowEvalSHA: during an upgrade (--redis-tenant-allow-evalsha) a namespace's
// user also gets EVALSHA, so a sidecar of an earlier release, which calls the scripts the
// manager preloads with EVALSHA, keeps deciding with Redis; EVAL, which would run any body,
// stays refused.
func TestTenantAllowEvalSHA(t *testing.T) {
	t.Parallel()
	srv, u := standaloneAdmin(t)
	ctx := testCtx(t)
	p := password(t)
	user := tenant(t, "upgrading", false, p)
	user.Commands = redisacl.TenantCommands(false, 0, true)
	ensure(ctx, t, u, user)
	if err := loadFunctions(ctx, srv.Client()); err != nil { // the manager preloads the scripts too
		t.Fatal(err)
	}
	c := client(t, redisconn.ModeStandalone, []string{srv.Addr()}, user.Name, p)
	if errs := limitercheck.All(ctx, c, "upgrading", limiter.FailClosed); len(errs) > 0 {
		t.Fatalf("an EVALSHA sidecar as the upgrading user: %v", errors.Join(errs...))
	}
	if err := c.Eval(ctx, "return 1", nil).Err(); !refusedByACL(err) {
		t.Fatalf("EVAL as the upgrading user: %v; want refused by the ACL", err)
	}
}
