package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// tenantGrace is the password grace of most tenancy tests: long enough to observe, short
// enough to wait out.
const tenantGrace = 2 * time.Second

// TestTenantUsersLifecycle: with per-namespace users on, the manager (as config/redis's
// administrative user) gives each namespace with a policy its own Redis user and a
// basic-auth Secret; a sidecar with shop's Secret decides shop's checks with Redis and is
// refused bank's keys; a Redis restart without an aclfile gets the users back within the
// resync; deleting shop's last policy keeps its user for the grace (sidecars may still
// enforce the last snapshot), then deletes it and the Secret, leaving bank untouched.
func TestTenantUsersLifecycle(t *testing.T) {
	e := suite(t)
	r := standaloneTenantRedis(t)
	shop, bank := kube.NewNamespace(t, e, "shop-"), kube.NewNamespace(t, e, "bank-")
	startTenantManager(t, e, r, r.tenancy(tenantGrace, 0), shop, bank)
	ctx := ctxFor(t)
	for _, ns := range []string{shop, bank} {
		readyPolicy(t, e, ns, "api")
	}
	secrets := map[string]*corev1.Secret{}
	for _, ns := range []string{shop, bank} {
		secrets[ns] = waitCredentials(t, e, ns)
		if err := r.userEverywhere(ctx, t, tenantPrefix+ns, string(secrets[ns].Data["password"])); err != nil {
			t.Fatal(err)
		}
	}
	if _, s := waitSnapshot(t, e, shop, "api"); !s.Redis.Functions {
		t.Fatalf("shop's snapshot names Redis %+v; want functions: true, so that sidecars call FCALL (their user may not EVAL)", s.Redis)
	}
	sidecar := newSidecarLimiter(t, r.sidecarClient(t, mountSecret(t, secrets[shop])), true)
	checkScope(ctx, t, sidecar, shop, bank)

	r.servers[0].Restart(t)
	start := time.Now()
	wait.Eventually(t, 10*resync, "users and functions back after a restart without an aclfile or persistence", func() error {
		for _, ns := range []string{shop, bank} {
			if err := r.userEverywhere(ctx, t, tenantPrefix+ns, string(secrets[ns].Data["password"])); err != nil {
				return err
			}
		}
		return r.functionsEverywhere(ctx)
	})
	t.Logf("users and functions back %s after the restart (resync %s)", time.Since(start).Round(time.Millisecond), resync)
	checkScope(ctx, t, sidecar, shop, bank)

	deletePolicy(t, e, shop, "api")
	checkRemoval(ctx, t, e, r, shop, secrets[bank])
	if refused := r.adminRefusals(ctx, t); len(refused) > 0 {
		t.Errorf("Redis refused the manager's administrative user: %v", refused)
	}
}

// checkScope: shop's sidecar decides shop's checks with Redis, and a policy of shop naming
// bank's keys is refused by Redis (its failure mode decides).
func checkScope(ctx context.Context, t *testing.T, l *limiter.Limiter, shop, bank string) {
	t.Helper()
	if d := l.Check(ctx, sidecarPolicy(t, shop, "api"), limiter.Request{Identity: "alice"}); d.Source != limiter.SourceRedis || !d.Allowed {
		t.Fatalf("shop's check as its own user: %+v", d)
	}
	stolen := policyUnder(t, shop, "api", "{rl:"+bank+"/api:${identity}}")
	if d := l.Check(ctx, stolen, limiter.Request{Identity: "alice"}); d.Source != limiter.SourceFailClosed || d.Err == nil {
		t.Fatalf("shop's sidecar on bank's keys: %+v; want refused by Redis", d)
	}
}

// checkRemoval waits out the removal of ns's user after its last policy: kept, with its
// Secret marked, until the grace has passed, then gone from every node with the Secret;
// the other namespace's Secret and user unchanged.
func checkRemoval(ctx context.Context, t *testing.T, e *kube.Env, r *tenantRedis, ns string, other *corev1.Secret) {
	t.Helper()
	marked := waitSecret(t, e, ns, "marked for deletion", func(s *corev1.Secret) error {
		if s.Annotations[tenancy.AnnotationDeleteAfter] == "" {
			return fmt.Errorf("annotations %v", s.Annotations)
		}
		return nil
	})
	if err := r.userEverywhere(ctx, t, tenantPrefix+ns, string(marked.Data["password"])); err != nil {
		t.Fatalf("during the grace: %v", err)
	}
	deleted := time.Now()
	wait.Eventually(t, readyTimeout, "user and Secret of "+ns+" removed", func() error {
		if err := r.userNowhere(ctx, t, tenantPrefix+ns); err != nil {
			return err
		}
		if getSecret(t, e, ns) != nil {
			return fmt.Errorf("the Secret of %s is still there", ns)
		}
		return nil
	})
	t.Logf("user and Secret of %s removed %s after the grace began (grace %s)", ns, time.Since(deleted).Round(time.Millisecond), tenantGrace)
	after := getSecret(t, e, other.Namespace)
	if after == nil || after.ResourceVersion != other.ResourceVersion {
		t.Errorf("the other namespace's Secret changed: %v", after)
	}
	if err := r.userEverywhere(ctx, t, tenantPrefix+other.Namespace, string(other.Data["password"])); err != nil {
		t.Errorf("the other namespace's user: %v", err)
	}
}

// TestTenantUsersCluster: on a 3-primary Cluster with a replica each, a namespace's user is
// set on all six nodes, and removed from all six with its last policy.
func TestTenantUsersCluster(t *testing.T) {
	e := suite(t)
	cl := redistest.StartCluster(t, 3, redistest.WithReplicas(1), redistest.WithNodeOptions(adminACL(t)))
	r := adminOn(t, redisconn.ModeCluster, cl.Addrs(), cl.Nodes()...)
	ns, other := kube.NewNamespace(t, e, "c-"), kube.NewNamespace(t, e, "c-")
	startTenantManager(t, e, r, r.tenancy(tenantGrace, 0), ns, other)
	ctx := ctxFor(t)
	for _, n := range []string{ns, other} {
		readyPolicy(t, e, n, "edge")
	}
	s := waitCredentials(t, e, ns)
	keep := waitCredentials(t, e, other)
	wait.Eventually(t, readyTimeout, "user on every node", func() error {
		return r.userEverywhere(ctx, t, tenantPrefix+ns, string(s.Data["password"]))
	})
	l := newSidecarLimiter(t, r.sidecarClient(t, mountSecret(t, s)), true)
	for i := range 30 { // identities over every primary
		if d := l.Check(ctx, sidecarPolicy(t, ns, "edge"), limiter.Request{Identity: fmt.Sprint("caller-", i)}); d.Source != limiter.SourceRedis {
			t.Fatalf("check %d as the namespace's user on Cluster: %+v", i, d)
		}
	}
	deletePolicy(t, e, ns, "edge")
	checkRemoval(ctx, t, e, r, ns, keep)
	if refused := r.adminRefusals(ctx, t); len(refused) > 0 {
		t.Errorf("Redis refused the manager's administrative user: %v", refused)
	}
}
