package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestTenantPasswordsNeverLeak: the per-namespace passwords reach the namespace's Secret
// and Redis (as hashes) only. The manager binary runs at its most verbose log level in
// tenancy mode and creates a namespace's user, rotates its password and retires the old
// one; neither password (nor its base64 forms), nor the administrative password, appears in
// the manager's whole output, its /metrics, or any ConfigMap, policy or Event of the
// namespace.
func TestTenantPasswordsNeverLeak(t *testing.T) {
	e := suite(t)
	r := standaloneTenantRedis(t)
	ns := kube.NewNamespace(t, e, "leak-")
	metrics := wait.FreeAddr(t)
	args := append(verboseArgs(r.servers[0].Addr(), redistest.CredentialsDir(t, tenantAdmin, tenantAdminPassword), metrics),
		"--redis-tenant-users", "--redis-tenant-password-grace", tenantGrace.String())
	m := startBinManager(t, writeKubeconfig(t, e.Config, ""), args...)
	readyPolicy(t, e, ns, "login")
	first := waitCredentials(t, e, ns)
	askRotation(t, e, first, "leak")
	second := waitRotated(t, e, ns, first, "leak")
	wait.Eventually(t, tenantGrace+readyTimeout, "previous password retired", func() error {
		if s := getSecret(t, e, ns); s == nil || s.Annotations[tenancy.AnnotationRetiringHash] != "" {
			return errors.New("not yet")
		}
		return nil
	})
	scrape := scrapeMetrics(t, m, metrics)
	places := objectsOf(t, e, ns)
	m.term(t)
	places["manager log"], places["metrics"] = m.output(), scrape
	if !strings.Contains(m.output(), "rotated redis password") {
		t.Fatalf("the manager logged no rotation: the log check proves little")
	}
	if !strings.Contains(scrape, "ratelimit_redis_tenant_password_rotations_total 1") {
		t.Errorf("metrics do not count the rotation")
	}
	secrets := map[string]string{"first password": string(first.Data["password"]),
		"second password": string(second.Data["password"]), "admin password": tenantAdminPassword}
	for what, needle := range secretForms(secrets) {
		for where, text := range places {
			if strings.Contains(text, needle) {
				t.Errorf("the %s appears in %s", what, where)
			}
		}
	}
	t.Logf("searched %d places (%d bytes of manager log) for 3 forms of 3 passwords", len(places), len(m.output()))
}
