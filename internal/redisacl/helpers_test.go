package redisacl_test

import (
	"context"
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

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	redistest "github.com/ratelimit-dev/ratelimit-operator/test/support/redis"
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

// credentialsDir is a mounted basic-auth Secret: username and password files.
func credentialsDir(t testing.TB, user, password string) string {
	t.Helper()
	dir := t.TempDir()
	writeCredentials(t, dir, user, password)
	return dir
}

func writeCredentials(t testing.TB, dir, user, password string) {
	t.Helper()
	for name, v := range map[string]string{"username": user, "password": password} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// client is a redisconn client (as the manager and the sidecars build theirs) reaching
// addrs in mode as user; closed when the test ends.
func client(t testing.TB, mode redisconn.Mode, addrs []string, user, password string) redis.UniversalClient {
	t.Helper()
	o := redisconn.Options{Mode: mode, Addrs: addrs, CredentialsPath: credentialsDir(t, user, password)}
	if mode == redisconn.ModeSentinel {
		o.MasterName = masterName
	}
	c, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// adminUsers is the operator's user keeper as the manager builds it (cmd/manager), as the
// administrative user, with the client it reaches Redis through.
func adminUsers(t testing.TB, mode redisconn.Mode, addrs []string) (*redisacl.Users, redis.UniversalClient) {
	t.Helper()
	return asUser(t, mode, addrs, adminUser, adminPassword)
}

// asUser is adminUsers as any user.
func asUser(t testing.TB, mode redisconn.Mode, addrs []string, user, pass string) (*redisacl.Users, redis.UniversalClient) {
	t.Helper()
	c := client(t, mode, addrs, user, pass)
	return &redisacl.Users{Nodes: nodesOf(t, c, mode, addrs, user, pass), Prefix: prefix}, c
}

// nodesOf are the nodes reached with c, as the manager finds them.
func nodesOf(t testing.TB, c redis.UniversalClient, mode redisconn.Mode, addrs []string, user, pass string) redisacl.Nodes {
	t.Helper()
	if mode == redisconn.ModeStandalone {
		return redisacl.ServerNodes(c.(*redis.Client))
	}
	o := redisconn.Options{Mode: mode, Addrs: addrs, MasterName: masterName, CredentialsPath: credentialsDir(t, user, pass)}
	opts, err := o.NodeOptions()
	if err != nil {
		t.Fatal(err)
	}
	if mode == redisconn.ModeCluster {
		n := &redisacl.ClusterNodes{Cluster: c.(*redis.ClusterClient), Options: opts}
		t.Cleanup(func() { _ = n.Close() })
		return n
	}
	n := &redisacl.SentinelNodes{Sentinels: addrs, MasterName: masterName, Options: opts}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// tenant is namespace ns's user accepting the passwords, as the operator builds it.
func tenant(t testing.TB, ns string, cluster bool, passwords ...string) redisacl.User {
	t.Helper()
	pattern, err := redisacl.KeyPattern("", ns)
	if err != nil {
		t.Fatal(err)
	}
	u := redisacl.User{Name: prefix + ns, KeyPatterns: []string{pattern}, Commands: redisacl.SidecarCommands(cluster, 0)}
	for _, p := range passwords {
		u.PasswordHashes = append(u.PasswordHashes, redisacl.HashPassword(p))
	}
	return u
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

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var policySeq atomic.Int64

// newPolicy is a one-request-per-hour policy of ns with the default key layout (every key
// under "{rl:<ns>/"), idempotent.
func newPolicy(t testing.TB, ns string, alg limiter.Algorithm, mode limiter.FailureMode) *limiter.Policy {
	t.Helper()
	return policyWithKeys(t, ns, alg, mode, "{rl:${namespace}/${policy}:${identity}}")
}

// policyWithKeys is newPolicy with the state and idempotency keys under tag.
func policyWithKeys(t testing.TB, ns string, alg limiter.Algorithm, mode limiter.FailureMode, tag string) *limiter.Policy {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ToLower(string(alg)), policySeq.Add(1))
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: ns, Name: name, Algorithm: alg,
		Limits:         []limiter.Limit{{Name: "hour", Requests: 1, Period: time.Hour}},
		StateKey:       tag + ":${limit}:${slot}",
		IdempotencyKey: tag + ":idem:${requestId}",
		TTL:            2 * time.Hour, IdempotencyTTL: time.Minute, FailureMode: mode})
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

var algorithms = []limiter.Algorithm{limiter.TokenBucket, limiter.SlidingWindow, limiter.FixedWindow, limiter.GCRA}

// checkAlgorithm runs what a sidecar runs for one policy: an idempotent admission, its
// replay, and the denial of the exhausted limit, each of which Redis must decide.
func checkAlgorithm(ctx context.Context, t testing.TB, l *limiter.Limiter, ns string, alg limiter.Algorithm) error {
	p := newPolicy(t, ns, alg, limiter.FailClosed)
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

// checkAll runs checkAlgorithm for every algorithm, without and with pipelining, and
// returns every failure.
func checkAll(ctx context.Context, t testing.TB, c redis.UniversalClient, ns string) []error {
	var errs []error
	for _, pipelining := range []bool{false, true} {
		l, err := limiter.New(c, limiter.Options{Timeout: 5 * time.Second, Pipelining: pipelining})
		if err != nil {
			return append(errs, err)
		}
		for _, alg := range algorithms {
			if err := checkAlgorithm(ctx, t, l, ns, alg); err != nil {
				errs = append(errs, fmt.Errorf("pipelining=%v: %w", pipelining, err))
			}
		}
		l.Close()
	}
	return errs
}

// exercise does what a sidecar does with Redis: checks of every algorithm (EVALSHA, and
// EVAL where the script is missing), the same after flush empties the script cache, and
// the breaker's PING.
func exercise(ctx context.Context, t testing.TB, c redis.UniversalClient, ns string, flush func(context.Context) error) []error {
	errs := checkAll(ctx, t, c, ns)
	if err := flush(ctx); err != nil {
		return append(errs, fmt.Errorf("SCRIPT FLUSH as the default user: %w", err))
	}
	for _, err := range checkAll(ctx, t, c, ns) {
		errs = append(errs, fmt.Errorf("after SCRIPT FLUSH: %w", err))
	}
	if err := c.Ping(ctx).Err(); err != nil {
		errs = append(errs, fmt.Errorf("PING: %w", err))
	}
	return errs
}

// flushScripts empties every node's script cache, as the default user.
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

// aclLog is ACL LOG of the nodes: "<reason>:<object>" per refusal, read as the default user.
func aclLog(ctx context.Context, t testing.TB, nodes ...*redistest.Server) []string {
	t.Helper()
	var out []string
	for _, n := range nodes {
		entries, err := n.Client().ACLLog(ctx, 1000).Result()
		if err != nil {
			t.Fatalf("%s ACL LOG: %v", n.Addr(), err)
		}
		for _, e := range entries {
			out = append(out, e.Reason+":"+e.Object)
		}
	}
	return out
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

// getUser is ACL GETUSER name on node n, nil when the node has no such user.
func getUser(ctx context.Context, t testing.TB, n *redistest.Server, name string) map[string]any {
	t.Helper()
	v, err := n.Client().Do(ctx, "ACL", "GETUSER", name).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		t.Fatalf("%s ACL GETUSER %s: %v", n.Addr(), name, err)
	}
	m, ok := v.(map[any]any)
	if !ok {
		t.Fatalf("%s ACL GETUSER %s: reply %T", n.Addr(), name, v)
	}
	out := map[string]any{}
	for k, v := range m {
		out[fmt.Sprint(k)] = v
	}
	return out
}

// userHashes are the password hashes node n holds for user name, sorted; nil without
// the user.
func userHashes(ctx context.Context, t testing.TB, n *redistest.Server, name string) []string {
	t.Helper()
	u := getUser(ctx, t, n, name)
	if u == nil {
		return nil
	}
	var out []string
	list, _ := u["passwords"].([]any)
	for _, h := range list {
		out = append(out, fmt.Sprint(h))
	}
	slices.Sort(out)
	return out
}

// holders are the nodes holding user name with exactly the hashes of want's passwords.
func holders(ctx context.Context, t testing.TB, nodes []*redistest.Server, want redisacl.User) []string {
	t.Helper()
	hashes := slices.Sorted(slices.Values(want.PasswordHashes))
	var out []string
	for _, n := range nodes {
		if slices.Equal(userHashes(ctx, t, n, want.Name), hashes) {
			out = append(out, n.Addr())
		}
	}
	return out
}

// refusedByACL reports whether err is Redis refusing a command or key by ACL: NOPERM for a
// command sent, "ERR The user executing the script can't ..." for one a script called.
func refusedByACL(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "NOPERM") ||
		strings.Contains(err.Error(), "The user executing the script can't"))
}
