package redisacl_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	redistest "github.com/ratelimit-dev/ratelimit-operator/test/support/redis"
)

// startTenants starts a server with the administrative user, creates the users of
// namespaces shop and bank through it as the manager does, and returns the server with a
// client per namespace (as its sidecars build it from their Secret).
func startTenants(t *testing.T) (srv *redistest.Server, shop, bank redis.UniversalClient) {
	t.Helper()
	redistest.RequireRedis(t)
	srv = redistest.StartServer(t, adminConf(t, nil))
	u, _ := adminUsers(t, redisconn.ModeStandalone, []string{srv.Addr()})
	ctx := testCtx(t)
	shopPass, bankPass := password(t), password(t)
	for ns, p := range map[string]string{"shop": shopPass, "bank": bankPass} {
		if err := u.Ensure(ctx, tenant(t, ns, false, p)); err != nil {
			t.Fatalf("Ensure %s as %s: %v", ns, adminUser, err)
		}
	}
	shop = client(t, redisconn.ModeStandalone, []string{srv.Addr()}, prefix+"shop", shopPass)
	bank = client(t, redisconn.ModeStandalone, []string{srv.Addr()}, prefix+"bank", bankPass)
	return srv, shop, bank
}

// TestTenantOwnChecks: as its own user, a namespace's sidecar runs every algorithm's real
// script (EVALSHA, the EVAL fallback after SCRIPT FLUSH, idempotent replays, denials), all
// decided by Redis, and Redis refuses nothing (ACL LOG stays empty).
func TestTenantOwnChecks(t *testing.T) {
	t.Parallel()
	srv, shop, bank := startTenants(t)
	ctx := testCtx(t)
	for ns, c := range map[string]redis.UniversalClient{"shop": shop, "bank": bank} {
		if errs := exercise(ctx, c, ns, redistest.FlushScripts(srv)); len(errs) > 0 {
			t.Errorf("%s's checks as its own user: %v", ns, errors.Join(errs...))
		}
	}
	if log := redistest.ACLRefusals(ctx, t, "", srv); len(log) > 0 {
		t.Fatalf("ACL LOG has refusals %v; a namespace's own checks must need none", log)
	}
}

// TestTenantScope: with shop's credentials, nothing outside shop's keys can be read or
// written, whether the key is declared in KEYS or only named inside the Lua, and no
// dangerous command runs, directly or from a script. Every attempt is refused by Redis's
// ACL (ACL LOG names the key or command) and every canary survives.
func TestTenantScope(t *testing.T) {
	t.Parallel()
	srv, shop, _ := startTenants(t)
	ctx := testCtx(t)
	canaries := []string{"{rl:bank/pay:alice}:hour", "{rl:shopping/x:y}:hour", "rl:shop/unbraced", "{rl:shop}x", "session:42"}
	for _, k := range canaries {
		if err := srv.Client().Set(ctx, k, "alive", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	own := "{rl:shop/p:me}:hour"
	refused := 0
	for _, k := range canaries {
		refused += attackKey(ctx, t, shop, own, k)
	}
	refused += attackCommands(ctx, t, shop, own)
	for _, k := range canaries {
		if v, err := srv.Client().Get(ctx, k).Result(); err != nil || v != "alive" {
			t.Errorf("canary %s after the attempts: %q, %v", k, v, err)
		}
	}
	log := redistest.ACLRefusals(ctx, t, "", srv)
	for _, k := range canaries {
		if !slices.Contains(log, "key:"+k) {
			t.Errorf("ACL LOG does not name %s as a refused key: %v", k, log)
		}
	}
	t.Logf("%d attempts refused by the ACL; %d ACL LOG entries", refused, len(log))
}

// attackKey tries to read and write key as c, declared in KEYS and only named in the Lua,
// and fails the test for each attempt Redis does not refuse by ACL. It returns the number
// of attempts.
func attackKey(ctx context.Context, t *testing.T, c redis.UniversalClient, own, key string) int {
	t.Helper()
	attempts := []struct {
		script string
		keys   []string
	}{
		{"return redis.call('SET', KEYS[1], 'pwned')", []string{key}},
		{"return redis.call('MGET', KEYS[1])", []string{key}},
		{"return redis.call('SET', '" + key + "', 'pwned')", []string{own}},
		{"return redis.call('MGET', KEYS[1], '" + key + "')", []string{own}},
		{"return redis.call('SET', '" + key + "', 'pwned', 'PX', '1')", nil},
	}
	for _, a := range attempts {
		err := c.Eval(ctx, a.script, a.keys).Err()
		if !refusedByACL(err) {
			t.Errorf("EVAL %q KEYS %v: %v; want refused by the ACL", a.script, a.keys, err)
		}
	}
	return len(attempts)
}

// attackCommands tries what the user must never run, directly and from Lua.
func attackCommands(ctx context.Context, t *testing.T, c redis.UniversalClient, own string) int {
	t.Helper()
	direct := [][]any{
		{"GET", own}, {"DEL", own}, {"KEYS", "*"}, {"SCAN", "0"}, {"FLUSHALL"}, {"FLUSHDB"},
		{"CONFIG", "SET", "maxmemory", "1"}, {"SCRIPT", "FLUSH"}, {"SCRIPT", "LOAD", "return 1"},
		{"FUNCTION", "FLUSH"}, {"ACL", "SETUSER", prefix + "shop", "+@all", "~*"}, {"ACL", "LIST"},
		{"ACL", "DELUSER", prefix + "bank"}, {"CLIENT", "KILL", "USER", prefix + "bank"}, {"CLIENT", "LIST"},
		{"MONITOR"}, {"SUBSCRIBE", "x"}, {"PUBLISH", "x", "y"}, {"SELECT", "1"}, {"INFO"},
		{"REPLICAOF", "127.0.0.1", "1"}, {"SHUTDOWN", "NOSAVE"},
	}
	for _, cmd := range direct {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v: %v; want NOPERM", cmd, err)
		}
	}
	// (CONFIG, ACL, SCRIPT and the like are refused from scripts whoever runs them.)
	fromLua := []string{"'FLUSHALL'", "'DEL', KEYS[1]", "'GET', KEYS[1]", "'EXPIRE', KEYS[1], '1'", "'KEYS', '*'",
		"'UNLINK', KEYS[1]", "'PUBLISH', 'x', 'y'"}
	for _, call := range fromLua {
		if err := c.Eval(ctx, "return redis.call("+call+")", []string{own}).Err(); !refusedByACL(err) {
			t.Errorf("redis.call(%s) from EVAL: %v; want refused by the ACL", call, err)
		}
	}
	return len(direct) + len(fromLua)
}

// TestTenantPolicyNamingOtherKeys: a policy published in shop whose keys name bank's (what
// the key-scope rule refuses, were it bypassed) is refused by Redis itself when shop's
// sidecar runs it: the real script, decided by the policy's failure mode with NOPERM, and
// bank's counter is untouched; bank's own sidecar still decides it.
func TestTenantPolicyNamingOtherKeys(t *testing.T) {
	t.Parallel()
	_, shop, bank := startTenants(t)
	ctx := testCtx(t)
	ls, err := limiter.New(shop, limiter.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	lb, err := limiter.New(bank, limiter.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	for _, alg := range algorithms {
		tag := "{rl:bank/pay-" + strings.ToLower(string(alg)) + ":${identity}}"
		stolen := policyWithKeys(t, "shop", alg, limiter.FailClosed, tag)
		d := ls.Check(ctx, stolen, limiter.Request{Identity: "alice"})
		if d.Source != limiter.SourceFailClosed || !refusedByACL(d.Err) {
			t.Errorf("%s: shop's policy on bank's keys: %+v; want refused by Redis, decided FailClosed", alg, d)
		}
		own := policyWithKeys(t, "bank", alg, limiter.FailClosed, tag)
		if d := lb.Check(ctx, own, limiter.Request{Identity: "alice"}); d.Source != limiter.SourceRedis || !d.Allowed {
			t.Errorf("%s: bank's first check after shop's attempt: %+v; want admitted by Redis (nothing debited)", alg, d)
		}
	}
}
