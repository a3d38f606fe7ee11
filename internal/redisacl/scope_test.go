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
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// startTenants starts a server with the administrative user, creates the users of
// namespaces shop and bank through it as the manager does, and returns the server with a
// client per namespace (as its sidecars build it from their Secret).
func startTenants(t *testing.T) (srv *redistest.Server, shop, bank redis.UniversalClient) {
	t.Helper()
	srv, u := standaloneAdmin(t)
	ctx := testCtx(t)
	pass := tenants(ctx, t, u, "shop", "bank")
	if err := loadFunctions(ctx, srv.Client()); err != nil {
		t.Fatal(err)
	}
	shop = client(t, redisconn.ModeStandalone, []string{srv.Addr()}, prefix+"shop", pass["shop"])
	bank = client(t, redisconn.ModeStandalone, []string{srv.Addr()}, prefix+"bank", pass["bank"])
	return srv, shop, bank
}

// TestTenantOwnChecks: as its own user, a namespace's sidecar runs every algorithm's real
// script as the function the manager loaded (FCALL; again after every function was flushed
// and loaded again), idempotent replays, denials and leases, all decided by Redis, and Redis
// refuses nothing (ACL LOG stays empty).
func TestTenantOwnChecks(t *testing.T) {
	t.Parallel()
	srv, shop, bank := startTenants(t)
	ctx := testCtx(t)
	for ns, c := range map[string]redis.UniversalClient{"shop": shop, "bank": bank} {
		if errs := exercise(ctx, c, ns, srv.Client(), srv); len(errs) > 0 {
			t.Errorf("%s's checks as its own user: %v", ns, errors.Join(errs...))
		}
	}
	if log := redistest.ACLRefusals(ctx, t, "", srv); len(log) > 0 {
		t.Fatalf("ACL LOG has refusals %v; a namespace's own checks must need none", log)
	}
}

// TestTenantScope: with shop's credentials, nothing outside shop's keys can be read or
// written, by any command the user is granted (MGET, SET, or the limiter's functions with
// the key among KEYS), no dangerous command runs, and no code of the user's choosing runs
// at all (EVAL, EVALSHA, SCRIPT and FUNCTION LOAD are refused). Every attempt is refused by
// Redis's ACL (ACL LOG names the key or command) and every canary survives.
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

// attackKey tries to read and write key as c with every command the user is granted that
// takes keys (MGET, SET, FCALL of the limiter's own functions and FCALL_RO of its peeks with
// key among KEYS), and
// fails the test for each attempt Redis does not refuse by ACL. It returns the number of
// attempts.
func attackKey(ctx context.Context, t *testing.T, c redis.UniversalClient, own, key string) int {
	t.Helper()
	fn := limiter.Scripts()[0].Function
	attempts := [][]any{
		{"MGET", key}, {"MGET", own, key}, {"SET", key, "pwned"}, {"SET", key, "pwned", "PX", "1"},
		{"FCALL", fn, "1", key, "1", "60000", "0", "1", "1000"},
		{"FCALL", fn, "2", own, key, "1", "60000", "0", "1", "1000", "1", "1000"},
		{"FCALL_RO", limiter.PeekScripts()[0].Function, "1", key, "1", "60000", "0", "1", "1000"},
	}
	for _, a := range attempts {
		if err := c.Do(ctx, a...).Err(); !refusedByACL(err) {
			t.Errorf("%v: %v; want refused by the ACL", a, err)
		}
	}
	return len(attempts)
}

// attackCommands tries what the user must never run: commands that change or read the
// server, other clients or other users, and every way to run code of its own choosing
// (EVAL, EVALSHA of a cached script, SCRIPT LOAD, FUNCTION LOAD) or to stop the limiter's
// functions. The user runs only the functions the manager loaded.
func attackCommands(ctx context.Context, t *testing.T, c redis.UniversalClient, own string) int {
	t.Helper()
	loop := "redis.call('SET', KEYS[1], '1') while true do end"
	lib := "#!lua name=pwn\nredis.register_function('pwn', function(KEYS, ARGV) " + loop + " end)"
	direct := [][]any{
		{"GET", own}, {"DEL", own}, {"KEYS", "*"}, {"SCAN", "0"}, {"FLUSHALL"}, {"FLUSHDB"},
		{"CONFIG", "SET", "maxmemory", "1"}, {"CONFIG", "GET", "*"}, {"SCRIPT", "FLUSH"}, {"SCRIPT", "LOAD", "return 1"},
		{"SCRIPT", "KILL"}, {"SCRIPT", "EXISTS", limiter.Scripts()[0].SHA},
		{"EVAL", loop, "1", own}, {"EVAL_RO", "return 1", "0"}, {"EVALSHA", limiter.Scripts()[0].SHA, "1", own},
		{"EVALSHA_RO", limiter.Scripts()[0].SHA, "1", own},
		{"FUNCTION", "LOAD", lib}, {"FUNCTION", "LOAD", "REPLACE", lib}, {"FUNCTION", "DELETE", limiter.Scripts()[0].Function},
		{"FUNCTION", "FLUSH"}, {"FUNCTION", "KILL"}, {"FUNCTION", "LIST"}, {"FUNCTION", "DUMP"}, {"FUNCTION", "RESTORE", "x"},
		{"ACL", "SETUSER", prefix + "shop", "+@all", "~*"}, {"ACL", "LIST"}, {"ACL", "DELUSER", prefix + "bank"},
		{"CLIENT", "KILL", "USER", prefix + "bank"}, {"CLIENT", "LIST"}, {"CLIENT", "PAUSE", "100000"},
		{"CLIENT", "NO-EVICT", "on"}, {"MONITOR"}, {"SUBSCRIBE", "x"}, {"PUBLISH", "x", "y"}, {"SELECT", "1"}, {"INFO"},
		{"MULTI"}, {"MEMORY", "USAGE", own}, {"OBJECT", "ENCODING", own}, {"PTTL", own},
		{"EXPIRE", own, "1"}, {"APPEND", own, "x"}, {"SETRANGE", own, "1000000", "x"}, {"LPUSH", own, "x"},
		{"REPLICAOF", "127.0.0.1", "1"}, {"FAILOVER"}, {"SAVE"}, {"BGSAVE"}, {"SHUTDOWN", "NOSAVE"},
	}
	for _, cmd := range direct {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v: %v; want NOPERM", cmd, err)
		}
	}
	// FCALL_RO is granted for peeks; it runs no function that may write.
	ro := []any{"FCALL_RO", limiter.Scripts()[0].Function, "1", own, "1", "60000", "0", "1", "1000"}
	if err := c.Do(ctx, ro...).Err(); err == nil || !strings.Contains(err.Error(), "write flag") {
		t.Errorf("%v: %v; want it refused for the function's writes", ro, err)
	}
	return len(direct) + 1
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
