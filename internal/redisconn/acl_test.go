package redisconn_test

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
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts/loader"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/limitercheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	aclConfPath = "../../config/redis/acl.conf"
	aclUser     = "ratelimit"
	aclPassword = "rl-acl-pa55"
)

// clusterOnlyRules are granted for go-redis's Cluster client; standalone never sends them.
var clusterOnlyRules = []string{"+cluster|slots", "+command"}

// aclConf makes a server include config/redis/acl.conf's ratelimit user with its password
// placeholder replaced and its rules passed through edit (nil keeps them).
func aclConf(t *testing.T, edit func([]string) []string) redistest.Option {
	t.Helper()
	return redistest.WithACLConf(t, aclConfPath, map[string]redistest.ACLUser{aclUser: {Password: aclPassword, Edit: edit}})
}

// aclGrants returns the +command rules of the ratelimit user in acl.conf.
func aclGrants(t *testing.T) []string {
	t.Helper()
	return redistest.ACLGrants(t, aclConfPath, aclUser)
}

// without returns an edit that drops rule, failing the test if the file does not have it.
func without(t *testing.T, rule string) func([]string) []string {
	return func(rules []string) []string {
		i := slices.Index(rules, rule)
		if i < 0 {
			t.Fatalf("acl.conf has no rule %s", rule)
		}
		return slices.Delete(rules, i, i+1)
	}
}

// with returns an edit that appends extra rules.
func with(extra ...string) func([]string) []string {
	return func(rules []string) []string { return append(rules, extra...) }
}

// newClient builds a client with redisconn.NewClient and closes it when the test ends.
func newClient(t *testing.T, o redisconn.Options) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx bounds a test's calls to Redis.
func testCtx(t *testing.T) context.Context { return wait.Context(t, 30*time.Second) }

// newLimiter is a limiter over c, as a sidecar builds one, closed when the test ends.
func newLimiter(t *testing.T, c redis.UniversalClient) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(c, limiter.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// checkAlgorithm runs a limiter check as the operator's sidecars do (limitercheck.Algorithm).
func checkAlgorithm(ctx context.Context, l *limiter.Limiter, alg limiter.Algorithm) error {
	return limitercheck.Algorithm(ctx, l, "acl", alg, limiter.FailOpen)
}

// exercise does with c what the operator does with Redis: the manager's script loader
// (SCRIPT EXISTS, SCRIPT LOAD on every primary), then what a sidecar does
// (limitercheck.Exercise: checks of every algorithm, the EVAL fallback after flush has
// emptied the script cache, PING). It returns every failure.
func exercise(ctx context.Context, c redis.UniversalClient, flush func(context.Context) error) []error {
	var errs []error
	if err := (&loader.ScriptLoader{Client: c}).Ensure(ctx); err != nil {
		errs = append(errs, fmt.Errorf("script loader: %w", err))
	}
	return append(errs, limitercheck.Exercise(ctx, c, "acl", limiter.FailOpen, flush)...)
}

// aclDenials returns the ACL LOG objects (commands or keys) refused on the nodes.
func aclDenials(ctx context.Context, t *testing.T, nodes ...*redistest.Server) []string {
	t.Helper()
	var objects []string
	for _, r := range redistest.ACLRefusals(ctx, t, "", nodes...) {
		_, object, _ := strings.Cut(r, ":") // "<reason>:<object>"; a reason holds no colon
		objects = append(objects, object)
	}
	return objects
}

// startACLServer starts a redis-server that includes acl.conf (rules edited by edit) and
// returns it with a client of database db for the ratelimit user (userClient).
func startACLServer(t *testing.T, db int, edit func([]string) []string) (*redistest.Server, redis.UniversalClient) {
	t.Helper()
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t, aclConf(t, edit))
	return srv, userClient(t, redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{srv.Addr()}, DB: db})
}

// userClient is newClient as acl.conf's ratelimit user, its credentials read from a
// basic-auth Secret (with the trailing newlines a hand-made Secret often has).
func userClient(t *testing.T, o redisconn.Options) redis.UniversalClient {
	t.Helper()
	o.CredentialsPath = redistest.CredentialsDir(t, aclUser+"\n", aclPassword+"\n")
	return newClient(t, o)
}

// TestACLStandalone runs everything the operator does against a real redis-server as the
// user of config/redis/acl.conf: it all works, Redis decides every check, and nothing is
// refused (ACL LOG stays empty).
func TestACLStandalone(t *testing.T) {
	t.Parallel()
	srv, c := startACLServer(t, 0, nil)
	ctx := testCtx(t)
	if errs := exercise(ctx, c, redistest.FlushScripts(srv)); len(errs) > 0 {
		t.Fatalf("operator paths failed as %s:\n%v", aclUser, errors.Join(errs...))
	}
	if d := aclDenials(ctx, t, srv); len(d) > 0 {
		t.Fatalf("ACL LOG has refusals %v; the operator must need none", d)
	}
	assertReloadedByEval(ctx, t, srv)
	assertHelloAsUser(ctx, t, srv)
}

// assertReloadedByEval checks that the checks after SCRIPT FLUSH ran EVAL (which caches the
// script again): every script is back although nobody ran SCRIPT LOAD since the flush.
func assertReloadedByEval(ctx context.Context, t *testing.T, srv *redistest.Server) {
	t.Helper()
	var shas []string
	for _, s := range limiter.Scripts() {
		shas = append(shas, s.SHA)
	}
	exists, err := srv.Client().ScriptExists(ctx, shas...).Result()
	if err != nil || slices.Contains(exists, false) {
		t.Fatalf("scripts after the EVAL fallback: %v, %v; want all cached again", exists, err)
	}
}

// assertHelloAsUser checks that the operator's connections authenticated as the ratelimit
// user with HELLO 3 (RESP3), which needs no grant.
func assertHelloAsUser(ctx context.Context, t *testing.T, srv *redistest.Server) {
	t.Helper()
	list, err := srv.Client().ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " user="+aclUser+" ") && strings.Contains(line, " resp=3") {
			return
		}
	}
	t.Fatalf("no RESP3 connection of user %s in CLIENT LIST:\n%s", aclUser, list)
}

// TestACLEveryGrantIsNeeded drops each standalone grant in turn and shows that some operator
// path is then refused: the line in acl.conf is minimal. The Cluster-only grants are covered
// by TestACLCluster.
func TestACLEveryGrantIsNeeded(t *testing.T) {
	t.Parallel()
	for _, rule := range aclGrants(t) {
		if slices.Contains(clusterOnlyRules, rule) {
			continue
		}
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			srv, c := startACLServer(t, 0, without(t, rule))
			ctx := testCtx(t)
			errs := exercise(ctx, c, redistest.FlushScripts(srv))
			if d := aclDenials(ctx, t, srv); !slices.Contains(d, strings.TrimPrefix(rule, "+")) {
				t.Fatalf("without %s: ACL LOG has %v (errors: %v); want it refused", rule, d, errs)
			}
		})
	}
}

// TestACLRefusesDangerousCommands shows what the user cannot do, directly or from Lua, and
// that the data and the configuration survive the attempts.
func TestACLRefusesDangerousCommands(t *testing.T) {
	t.Parallel()
	srv, c := startACLServer(t, 0, nil)
	ctx := testCtx(t)
	admin := srv.Client()
	if err := admin.Set(ctx, "canary", "alive", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]any{
		{"FLUSHALL"}, {"FLUSHDB"}, {"CONFIG", "SET", "maxmemory", "1"}, {"CONFIG", "GET", "*"},
		{"KEYS", "*"}, {"SCAN", "0"}, {"DEL", "canary"}, {"UNLINK", "canary"}, {"GET", "canary"},
		{"EXPIRE", "canary", "1"}, {"SCRIPT", "FLUSH"}, {"SCRIPT", "KILL"}, {"FUNCTION", "FLUSH"},
		{"ACL", "SETUSER", aclUser, "+@all"}, {"CLIENT", "LIST"}, {"CLIENT", "KILL", "USER", "default"},
		{"MIGRATE", "127.0.0.1", "1", "canary", "0", "100"}, {"SAVE"},
		{"REPLICAOF", "127.0.0.1", "1"}, {"PUBLISH", "ch", "x"}, {"SELECT", "1"}, {"INFO"},
		{"SHUTDOWN", "NOSAVE"},
	} {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v as %s: %v; want NOPERM", cmd, aclUser, err)
		}
	}
	for _, call := range []string{"'FLUSHALL'", "'DEL', KEYS[1]", "'EXPIRE', KEYS[1], '1'", "'KEYS', '*'"} {
		err := c.Eval(ctx, "return redis.call("+call+")", []string{"canary"}).Err()
		if err == nil || !strings.Contains(err.Error(), "can't run this command") {
			t.Errorf("redis.call(%s) from EVAL as %s: %v; want refused", call, aclUser, err)
		}
	}
	if v, err := admin.Get(ctx, "canary").Result(); err != nil || v != "alive" {
		t.Fatalf("canary after the attempts: %q, %v", v, err)
	}
	if v, err := admin.ConfigGet(ctx, "maxmemory").Result(); err != nil || v["maxmemory"] != "0" {
		t.Fatalf("maxmemory after the attempts: %v, %v", v, err)
	}
}

// TestACLSelect shows that --redis-db other than 0 needs +select, as acl.conf says.
func TestACLSelect(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, c := startACLServer(t, 1, nil)
	if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "select") {
		t.Fatalf("--redis-db 1 without +select: %v; want SELECT refused", err)
	}
	srv, c := startACLServer(t, 1, with("+select"))
	if errs := exercise(ctx, c, redistest.FlushScripts(srv)); len(errs) > 0 {
		t.Fatalf("--redis-db 1 with +select: %v", errors.Join(errs...))
	}
}

// TestACLNarrowKeyPattern shows the narrowing acl.conf suggests: with ~{rl:* the default key
// layout works, and a policy whose keys fall outside is refused (its failure mode decides).
func TestACLNarrowKeyPattern(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv, c := startACLServer(t, 0, func(rules []string) []string {
		return append(without(t, "~*")(rules), "~{rl:*")
	})
	if errs := exercise(ctx, c, redistest.FlushScripts(srv)); len(errs) > 0 {
		t.Fatalf("default key layout under ~{rl:*: %v", errors.Join(errs...))
	}
	l := newLimiter(t, c)
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: "acl", Name: "outside", Algorithm: limiter.FixedWindow,
		Limits: []limiter.Limit{{Name: "hour", Requests: 1, Period: time.Hour}}, StateKey: "{other:${identity}}:${limit}",
		TTL: 2 * time.Hour, FailureMode: limiter.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	if d := l.Check(ctx, p, limiter.Request{Identity: "caller"}); d.Source != limiter.SourceFailClosed ||
		d.Err == nil || !strings.Contains(d.Err.Error(), "NOPERM") {
		t.Fatalf("key outside ~{rl:*: %+v; want refused by Redis and decided FailClosed", d)
	}
}

// TestACLCluster runs the operator paths on a 3-primary Cluster whose nodes all include
// acl.conf, and shows the two Cluster-only grants are needed there.
func TestACLCluster(t *testing.T) {
	t.Parallel()
	for _, drop := range append([]string{""}, clusterOnlyRules...) {
		name := "acl.conf"
		if drop != "" {
			name = "without " + drop
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var edit func([]string) []string
			if drop != "" {
				edit = without(t, drop)
			}
			redistest.RequireRedis(t)
			cl := redistest.StartCluster(t, 3, redistest.WithNodeOptions(aclConf(t, edit)))
			c := userClient(t, redisconn.Options{Mode: redisconn.ModeCluster, Addrs: cl.Addrs()[:1]})
			ctx := testCtx(t)
			errs := exercise(ctx, c, redistest.FlushScripts(cl.Primaries()...))
			denied := aclDenials(ctx, t, cl.Nodes()...)
			switch {
			case drop == "" && (len(errs) > 0 || len(denied) > 0):
				t.Fatalf("operator paths on Cluster: errors %v, ACL LOG %v", errors.Join(errs...), denied)
			case drop != "" && !slices.Contains(denied, strings.TrimPrefix(drop, "+")):
				t.Fatalf("without %s: ACL LOG has %v (errors: %v); want it refused", drop, denied, errs)
			}
		})
	}
}
