package redisacl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	redistest "github.com/ratelimit-dev/ratelimit-operator/test/support/redis"
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
		if err := u.Ensure(ctx, user); err != nil {
			t.Fatal(err)
		}
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
	if err := u.Ensure(ctx, user); err != nil {
		t.Fatal(err)
	}
	o := redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{srv.Addr()}, DB: 1,
		CredentialsPath: redistest.CredentialsDir(t, user.Name, p)}
	c, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "select") {
		t.Fatalf("database 1 without SELECT: %v; want SELECT refused", err)
	}
	user.Commands = redisacl.TenantCommands(false, 1, false)
	if err := u.Ensure(ctx, user); err != nil {
		t.Fatal(err)
	}
	if errs := exercise(ctx, c, "db1", srv.Client(), srv); len(errs) > 0 {
		t.Fatalf("database 1 with TenantCommands(false, 1, false): %v", errors.Join(errs...))
	}
}

// managerWork is what the manager does with Redis in tenancy mode, as its administrative
// user: load the scripts and functions on every primary (after flush emptied them), create a user on
// every node, read every node's users to repair one a node lost, delete it. It returns
// every failure.
func managerWork(ctx context.Context, admin redis.UniversalClient, u *redisacl.Users, flush, lose func(context.Context) error) []error {
	var errs []error
	if err := flush(ctx); err != nil {
		return []error{err}
	}
	if err := (&controller.ScriptLoader{Client: admin, Functions: true, Log: logr.Discard()}).Ensure(ctx); err != nil {
		errs = append(errs, fmt.Errorf("script loader: %w", err))
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

// adminGrants are the +command rules of the administrative user in acl.conf.
func adminGrants(t *testing.T) []string {
	t.Helper()
	grants := redistest.ACLGrants(t, aclConfPath, adminUser)
	if len(grants) == 0 {
		t.Fatalf("%s: the %s user grants nothing", aclConfPath, adminUser)
	}
	return grants
}

// TestAdminACL: as config/redis/acl.conf's administrative user, everything the manager
// does in tenancy mode works and Redis refuses nothing; without any one of its standalone
// grants (the Cluster one in TestClusterUsers) some of that work is refused. The user
// holds no key at all.
func TestAdminACL(t *testing.T) {
	t.Parallel()
	for _, drop := range append([]string{""}, adminGrants(t)...) {
		if strings.HasPrefix(drop, "+cluster|") {
			continue // TestClusterUsers
		}
		t.Run("without "+drop, func(t *testing.T) {
			t.Parallel()
			redistest.RequireRedis(t)
			srv := redistest.StartServer(t, adminConf(t, func(rules []string) []string {
				return slices.DeleteFunc(rules, func(r string) bool { return r == drop })
			}))
			u, admin := adminUsers(t, redisconn.ModeStandalone, []string{srv.Addr()})
			ctx := testCtx(t)
			errs := managerWork(ctx, admin, u, redistest.FlushScripts(srv), deleteUsers(prefix+"work", srv))
			log := redistest.ACLRefusals(ctx, t, "", srv)
			switch {
			case drop == "" && (len(errs) > 0 || len(log) > 0):
				t.Fatalf("manager work as %s: errors %v, ACL LOG %v", adminUser, errors.Join(errs...), log)
			case drop != "" && !slices.Contains(log, "command:"+strings.TrimPrefix(drop, "+")):
				t.Fatalf("without %s: ACL LOG %v (errors %v); want it refused", drop, log, errs)
			}
			if drop == "" {
				for _, cmd := range [][]any{{"GET", "k"}, {"SET", "k", "v"}, {"FLUSHALL"}, {"CONFIG", "GET", "*"}} {
					if err := admin.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
						t.Errorf("%v as %s: %v; want NOPERM", cmd, adminUser, err)
					}
				}
			}
		})
	}
}
