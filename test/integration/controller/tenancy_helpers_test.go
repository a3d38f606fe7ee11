package controller

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	tenantAdmin         = "ratelimit-admin"
	tenantAdminPassword = "admin-pa55-envtest"
	tenantPrefix        = tenancy.DefaultUserPrefix
	tenantSecret        = tenancy.DefaultSecretName
)

// adminACL makes a server include config/redis/acl.conf's administrative user.
func adminACL(t testing.TB) redistest.Option {
	t.Helper()
	return redistest.WithACLConf(t, aclConfPath(), map[string]redistest.ACLUser{tenantAdmin: {Password: tenantAdminPassword}})
}

// aclConfPath is config/redis/acl.conf.
func aclConfPath() string { return filepath.Join(kube.RepoRoot(), "config", "redis", "acl.conf") }

// tenantRedis is one Redis deployment reached as the manager reaches it in tenancy mode.
type tenantRedis struct {
	admin redis.UniversalClient
	topo  redisconn.Topology
	nodes redisacl.Nodes
	// servers are every node, read as the default user by the test.
	servers []*redistest.Server
}

// functionsEverywhere reports the first primary among the servers that lacks one of the
// limiter's function libraries (which the manager loads in tenancy mode).
func (r *tenantRedis) functionsEverywhere(ctx context.Context) error {
	for _, n := range r.servers {
		if role, err := n.Client().Do(ctx, "ROLE").Slice(); err != nil || len(role) == 0 || role[0] != "master" {
			continue
		}
		libs, err := n.Client().FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: scripts.FunctionPrefix + "*"}).Result()
		if err != nil {
			return fmt.Errorf("%s: FUNCTION LIST: %w", n.Addr(), err)
		}
		if len(libs) < len(limiter.AllScripts()) {
			return fmt.Errorf("%s holds %d of the %d function libraries", n.Addr(), len(libs), len(limiter.AllScripts()))
		}
	}
	return nil
}

// adminOn reaches the servers in mode through addrs as the administrative user, as
// cmd/manager does (redisconn client, nodes from NodeOptions).
func adminOn(t testing.TB, mode redisconn.Mode, addrs []string, servers ...*redistest.Server) *tenantRedis {
	t.Helper()
	o := redisconn.Options{Mode: mode, Addrs: addrs, CredentialsPath: redistest.CredentialsDir(t, tenantAdmin, tenantAdminPassword)}
	c, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := &tenantRedis{admin: c, topo: o.Topology(), servers: servers}
	if mode == redisconn.ModeStandalone {
		r.nodes = redisacl.ServerNodes(c.(*redis.Client))
		return r
	}
	opts, err := o.NodeOptions()
	if err != nil {
		t.Fatal(err)
	}
	n := &redisacl.ClusterNodes{Cluster: c.(*redis.ClusterClient), Options: opts}
	t.Cleanup(func() { _ = n.Close() })
	r.nodes = n
	return r
}

// standaloneTenantRedis is a fresh redis-server with the administrative user.
func standaloneTenantRedis(t testing.TB) *tenantRedis {
	t.Helper()
	srv := redistest.StartServer(t, adminACL(t))
	return adminOn(t, redisconn.ModeStandalone, []string{srv.Addr()}, srv)
}

// tenancy are the suite's tenancy options over r: short grace and resync for tests.
func (r *tenantRedis) tenancy(grace, period time.Duration) *tenancy.Options {
	return &tenancy.Options{Nodes: r.nodes, Topology: r.topo, Grace: grace, RotationPeriod: period, Resync: resync}
}

// startTenantManager replaces the shared manager, for the rest of the test, with one in
// tenancy mode on r watching only namespaces.
func startTenantManager(t *testing.T, e *kube.Env, r *tenantRedis, opts *tenancy.Options, namespaces ...string) *manager {
	t.Helper()
	return replaceShared(t, func() (*manager, error) {
		return startManagerWith(e, r.admin, r.topo, opts, namespaces...)
	})
}

// getSecret reads the namespace's credentials Secret; nil when there is none.
func getSecret(t testing.TB, e *kube.Env, ns string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: tenantSecret}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get Secret %s/%s: %v", ns, tenantSecret, err)
	}
	return &s
}

// waitSecret waits until the namespace's Secret satisfies ok and returns it.
func waitSecret(t testing.TB, e *kube.Env, ns, what string, ok func(*corev1.Secret) error) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	wait.Eventually(t, readyTimeout, "Secret of "+ns+": "+what, func() error {
		if s = getSecret(t, e, ns); s == nil {
			return errors.New("no Secret")
		}
		return ok(s)
	})
	return s
}

// waitCredentials waits for the namespace's Secret and checks its form.
func waitCredentials(t testing.TB, e *kube.Env, ns string) *corev1.Secret {
	t.Helper()
	s := waitSecret(t, e, ns, "credentials", func(*corev1.Secret) error { return nil })
	switch {
	case s.Type != corev1.SecretTypeBasicAuth:
		t.Fatalf("Secret type %s, want %s", s.Type, corev1.SecretTypeBasicAuth)
	case string(s.Data["username"]) != tenantPrefix+ns:
		t.Fatalf("username %q, want %q", s.Data["username"], tenantPrefix+ns)
	case len(s.Data["password"]) != 43:
		t.Fatalf("password of %d characters, want 43 (32 random bytes)", len(s.Data["password"]))
	case s.Labels["app.kubernetes.io/managed-by"] != "ratelimit-operator" || s.Labels[tenancy.LabelCredentials] != "true":
		t.Fatalf("labels %v: not marked as the operator's", s.Labels)
	}
	return s
}

// userEverywhere says whether every node holds user with exactly the passwords' hashes.
func (r *tenantRedis) userEverywhere(ctx context.Context, t testing.TB, user string, passwords ...string) error {
	want := []string{}
	for _, p := range passwords {
		want = append(want, redisacl.HashPassword(p))
	}
	slices.Sort(want)
	for _, n := range r.servers {
		if got := n.PasswordHashes(ctx, t, user); !slices.Equal(got, want) {
			return fmt.Errorf("%s holds %s with hashes %v, want %v", n.Addr(), user, got, want)
		}
	}
	return nil
}

// userNowhere says whether no node holds user.
func (r *tenantRedis) userNowhere(ctx context.Context, t testing.TB, user string) error {
	for _, n := range r.servers {
		if got := n.PasswordHashes(ctx, t, user); got != nil {
			return fmt.Errorf("%s still holds %s", n.Addr(), user)
		}
	}
	return nil
}

// adminRefusals are the ACL LOG entries of the administrative user on every node: the
// manager's work needs none.
func (r *tenantRedis) adminRefusals(ctx context.Context, t testing.TB) []string {
	t.Helper()
	return redistest.ACLRefusals(ctx, t, tenantAdmin, r.servers...)
}

// sidecarClient is a client as a sidecar of the namespace builds it from the mounted
// Secret in dir.
func (r *tenantRedis) sidecarClient(t testing.TB, dir string) redis.UniversalClient {
	t.Helper()
	o := redisconn.Options{Mode: r.topo.Mode, Addrs: r.topo.Addrs, CredentialsPath: dir}
	c, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mountSecret writes the Secret's data into a fresh directory, as the kubelet mounts it.
func mountSecret(t testing.TB, s *corev1.Secret) string {
	t.Helper()
	files := map[string]string{}
	for k, v := range s.Data {
		files[k] = string(v)
	}
	return redistest.SecretDir(t, files)
}

// sidecarPolicy is a policy of ns as the controller compiles a default-layout policy (keys
// "{rl:<ns>/<name>:<identity>}:<limit>"), roomy, failing closed, calling its script as the
// function the manager loads (a namespace's user may call nothing else).
func sidecarPolicy(t testing.TB, ns, name string) *limiter.Policy {
	t.Helper()
	return policyUnder(t, ns, name, "{rl:${namespace}/${policy}:${identity}}")
}

// policyUnder is sidecarPolicy with its keys under tag.
func policyUnder(t testing.TB, ns, name, tag string) *limiter.Policy {
	t.Helper()
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: ns, Name: name, Algorithm: limiter.TokenBucket,
		Limits:   []limiter.Limit{{Name: "per-second", Requests: 1_000_000, Period: time.Second}},
		StateKey: tag + ":${limit}", TTL: time.Minute, FailureMode: limiter.FailClosed, Functions: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newSidecarLimiter is a limiter as the sidecar builds it, on c.
func newSidecarLimiter(t testing.TB, c redis.UniversalClient, pipelining bool) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(c, limiter.Options{Timeout: time.Second, Pipelining: pipelining})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
