package redisconn_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	redistest "github.com/ratelimit-dev/ratelimit-operator/test/support/redis"
)

const (
	aclConfPath    = "../../config/redis/acl.conf"
	aclUser        = "ratelimit"
	aclPassword    = "rl-acl-pa55"
	aclPlaceholder = "#REPLACE-WITH-SHA256-HEX-OF-THE-PASSWORD"
	// adminPlaceholder is the administrative user's (internal/redisacl tests it); replaced
	// here only so that the server starts.
	adminPlaceholder = "#REPLACE-WITH-SHA256-HEX-OF-THE-ADMIN-PASSWORD"
)

// clusterOnlyRules are granted for go-redis's Cluster client; standalone never sends them.
var clusterOnlyRules = []string{"+cluster|slots", "+command"}

// aclConf writes config/redis/acl.conf with the password placeholder replaced and the
// ratelimit user's rules passed through edit (nil keeps them), and returns its path.
func aclConf(t *testing.T, edit func([]string) []string) string {
	t.Helper()
	src, err := os.ReadFile(aclConfPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "user "+aclUser+" ") })
	if i < 0 {
		t.Fatalf("%s declares no user %s", aclConfPath, aclUser)
	}
	f := strings.Fields(lines[i])
	if !slices.Contains(f, aclPlaceholder) {
		t.Fatalf("%s: the user line lost its password placeholder %s", aclConfPath, aclPlaceholder)
	}
	sum := sha256.Sum256([]byte(aclPassword))
	f[slices.Index(f, aclPlaceholder)] = "#" + hex.EncodeToString(sum[:])
	rules := f[2:]
	if edit != nil {
		rules = edit(slices.Clone(rules))
	}
	lines[i] = strings.Join(append([]string{"user", aclUser}, rules...), " ")
	adminSum := sha256.Sum256([]byte("admin-" + aclPassword))
	text := strings.ReplaceAll(strings.Join(lines, "\n"), adminPlaceholder, "#"+hex.EncodeToString(adminSum[:]))
	path := filepath.Join(t.TempDir(), "acl.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// aclGrants returns the +command rules of the ratelimit user in acl.conf.
func aclGrants(t *testing.T) []string {
	t.Helper()
	var grants []string
	aclConf(t, func(rules []string) []string {
		for _, r := range rules {
			if strings.HasPrefix(r, "+") {
				grants = append(grants, r)
			}
		}
		return rules
	})
	return grants
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

// aclSecret writes a basic-auth Secret directory for the ratelimit user.
func aclSecret(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{"username": aclUser + "\n", "password": aclPassword + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
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

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var policySeq atomic.Int64

// checkAlgorithm runs a limiter check as the operator's sidecars do: an idempotent admission,
// its replay, and a denial of the exhausted limit, all of which Redis must decide.
func checkAlgorithm(ctx context.Context, l *limiter.Limiter, alg limiter.Algorithm) error {
	name := fmt.Sprintf("%s-%d", strings.ToLower(string(alg)), policySeq.Add(1))
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: "acl", Name: name, Algorithm: alg,
		Limits:         []limiter.Limit{{Name: "hour", Requests: 1, Period: time.Hour}},
		StateKey:       "{rl:${namespace}/${policy}:${identity}}:${limit}:${slot}",
		IdempotencyKey: "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}",
		TTL:            2 * time.Hour, IdempotencyTTL: time.Minute, FailureMode: limiter.FailOpen})
	if err != nil {
		return fmt.Errorf("%s: NewPolicy: %w", alg, err)
	}
	first := l.Check(ctx, p, limiter.Request{Identity: "caller", RequestID: "req-1"})
	replay := l.Check(ctx, p, limiter.Request{Identity: "caller", RequestID: "req-1"})
	denied := l.Check(ctx, p, limiter.Request{Identity: "caller"})
	for _, d := range []limiter.Decision{first, replay, denied} {
		if d.Source != limiter.SourceRedis {
			return fmt.Errorf("%s: decided by %s: %w", alg, d.Source, d.Err)
		}
	}
	if !first.Allowed || !replay.Allowed || !replay.Replayed || denied.Allowed {
		return fmt.Errorf("%s: decisions %+v, %+v, %+v; want admitted, replayed, denied", alg, first, replay, denied)
	}
	return nil
}

// checkAll runs checkAlgorithm for every algorithm, without and with pipelining.
func checkAll(ctx context.Context, c redis.UniversalClient) []error {
	var errs []error
	for _, pipelining := range []bool{false, true} {
		l, err := limiter.New(c, limiter.Options{Timeout: 5 * time.Second, Pipelining: pipelining})
		if err != nil {
			return append(errs, err)
		}
		for _, alg := range []limiter.Algorithm{limiter.TokenBucket, limiter.SlidingWindow, limiter.FixedWindow, limiter.GCRA} {
			if err := checkAlgorithm(ctx, l, alg); err != nil {
				errs = append(errs, fmt.Errorf("pipelining=%v: %w", pipelining, err))
			}
		}
		l.Close()
	}
	return errs
}

// exercise does with c what the operator does with Redis: the manager's script loader
// (SCRIPT EXISTS, SCRIPT LOAD on every primary), limiter checks of every algorithm (EVALSHA),
// the EVAL fallback after flush has emptied the script cache, and the breaker's PING. It
// returns every failure.
func exercise(ctx context.Context, c redis.UniversalClient, flush func(context.Context) error) []error {
	var errs []error
	if err := (&controller.ScriptLoader{Client: c}).Ensure(ctx); err != nil {
		errs = append(errs, fmt.Errorf("script loader: %w", err))
	}
	errs = append(errs, checkAll(ctx, c)...)
	if err := flush(ctx); err != nil {
		return append(errs, fmt.Errorf("SCRIPT FLUSH as admin: %w", err))
	}
	for _, err := range checkAll(ctx, c) {
		errs = append(errs, fmt.Errorf("after SCRIPT FLUSH: %w", err))
	}
	if err := c.Ping(ctx).Err(); err != nil {
		errs = append(errs, fmt.Errorf("PING: %w", err))
	}
	return errs
}

// aclDenials returns the ACL LOG objects (commands or keys) refused on the nodes.
func aclDenials(ctx context.Context, t *testing.T, nodes ...*redistest.Server) []string {
	t.Helper()
	var objects []string
	for _, n := range nodes {
		log, err := n.Client().ACLLog(ctx, 1000).Result()
		if err != nil {
			t.Fatalf("%s ACL LOG: %v", n.Addr(), err)
		}
		for _, e := range log {
			objects = append(objects, e.Object)
		}
	}
	return objects
}

// flushScripts empties the script cache of every node, as the default (admin) user.
func flushScripts(nodes ...*redistest.Server) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, n := range nodes {
			if err := n.Client().ScriptFlush(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", n.Addr(), err)
			}
		}
		return nil
	}
}

// startACLServer starts a redis-server that includes acl.conf (rules edited by edit) and
// returns it with a client for the ratelimit user built from a basic-auth Secret.
func startACLServer(t *testing.T, db int, edit func([]string) []string) (*redistest.Server, redis.UniversalClient) {
	t.Helper()
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t, redistest.WithArgs("--include", aclConf(t, edit)))
	c := newClient(t, redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{srv.Addr()}, DB: db,
		CredentialsPath: aclSecret(t)})
	return srv, c
}

// TestACLStandalone runs everything the operator does against a real redis-server as the
// user of config/redis/acl.conf: it all works, Redis decides every check, and nothing is
// refused (ACL LOG stays empty).
func TestACLStandalone(t *testing.T) {
	t.Parallel()
	srv, c := startACLServer(t, 0, nil)
	ctx := testCtx(t)
	if errs := exercise(ctx, c, flushScripts(srv)); len(errs) > 0 {
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
			errs := exercise(ctx, c, flushScripts(srv))
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
	if errs := exercise(ctx, c, flushScripts(srv)); len(errs) > 0 {
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
	if errs := exercise(ctx, c, flushScripts(srv)); len(errs) > 0 {
		t.Fatalf("default key layout under ~{rl:*: %v", errors.Join(errs...))
	}
	l, err := limiter.New(c, limiter.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
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
			cl := redistest.StartCluster(t, 3, redistest.WithNodeOptions(redistest.WithArgs("--include", aclConf(t, edit))))
			c := newClient(t, redisconn.Options{Mode: redisconn.ModeCluster, Addrs: cl.Addrs()[:1], CredentialsPath: aclSecret(t)})
			ctx := testCtx(t)
			errs := exercise(ctx, c, flushScripts(cl.Primaries()...))
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
