package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestCountersProtected: on a Redis that keeps counters a policy reports
// CountersProtected=True without an event; switching the node to allkeys-lru turns it False
// (CountersEvictable, naming the node and the setting) with a Warning event, Ready staying
// True; switching back to noeviction turns it True with a Normal event.
func TestCountersProtected(t *testing.T) {
	e := suite(t)
	rds := redistest.StartServer(t, redistest.WithArgs(protectedRedis...))
	ns := kube.NewNamespace(t, e, "mem-")
	replaceShared(t, func() (*manager, error) { return startManager(e, rds.Client(), standaloneTopology(rds), ns) })
	create(t, e, newPolicy(ns, "api", 10))
	waitCondition(t, e, ns, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionTrue, v1alpha1.ReasonCountersProtected)
	waitReady(t, e, ns, "api")
	checkHealthyEvents(t, e, ns, "api")

	configSet(t, rds, "maxmemory-policy", "allkeys-lru")
	p := waitCondition(t, e, ns, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionFalse, v1alpha1.ReasonCountersEvictable)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionCountersProtected); !strings.Contains(c.Message,
		"maxmemory-policy allkeys-lru on "+rds.Addr()) {
		t.Errorf("CountersProtected message %q; want the node and its policy named", c.Message)
	}
	if err := readyErr(p); err != nil {
		t.Errorf("evictable counters must not gate Ready: %v", err)
	}
	waitEvents(t, e, ns, "api", v1alpha1.ReasonCountersEvictable, 1)
	checkEventType(t, e, ns, "api", v1alpha1.ReasonCountersEvictable, corev1.EventTypeWarning)

	configSet(t, rds, "maxmemory-policy", "noeviction")
	waitCondition(t, e, ns, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionTrue, v1alpha1.ReasonCountersProtected)
	waitEvents(t, e, ns, "api", v1alpha1.ReasonCountersProtected, 1)
	checkEventType(t, e, ns, "api", v1alpha1.ReasonCountersProtected, corev1.EventTypeNormal)
}

// TestCountersProtectedForeignKeys: with per-namespace users, a tenant writing values
// without a TTL in its own scope turns its own policies' CountersProtected False
// (ForeignKeys, with a Warning event) and leaves the other namespace's True; once its keys
// carry a TTL again, True.
func TestCountersProtectedForeignKeys(t *testing.T) {
	e := suite(t)
	srv := redistest.StartServer(t, adminACL(t), redistest.WithArgs(protectedRedis...))
	r := adminOn(t, redisconn.ModeStandalone, []string{srv.Addr()}, srv)
	shop, bank := kube.NewNamespace(t, e, "mem-shop-"), kube.NewNamespace(t, e, "mem-bank-")
	startTenantManager(t, e, r, r.tenancy(time.Minute, 0), shop, bank)
	for _, ns := range []string{shop, bank} {
		create(t, e, newPolicy(ns, "api", 10))
		waitCondition(t, e, ns, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionTrue, v1alpha1.ReasonCountersProtected)
	}
	tenant := r.sidecarClient(t, mountSecret(t, waitCredentials(t, e, bank)))
	ctx := ctxFor(t)
	keys := make([]string, 32)
	for i := range keys {
		keys[i] = fmt.Sprintf("{rl:%s/fill-%d}", bank, i)
		if err := tenant.Set(ctx, keys[i], strings.Repeat("x", 64<<10), 0).Err(); err != nil {
			t.Fatalf("%s's user: SET without TTL in its scope: %v", bank, err)
		}
	}
	p := waitCondition(t, e, bank, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionFalse, v1alpha1.ReasonForeignKeys)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionCountersProtected); !strings.Contains(c.Message, bank) {
		t.Errorf("message %q does not name %s", c.Message, bank)
	}
	waitEvents(t, e, bank, "api", v1alpha1.ReasonForeignKeys, 1)
	checkEventType(t, e, bank, "api", v1alpha1.ReasonForeignKeys, corev1.EventTypeWarning)
	waitCondition(t, e, shop, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionTrue, v1alpha1.ReasonCountersProtected)

	for _, k := range keys { // the tenant may not DEL; a TTL makes them the limiter's kind
		if err := tenant.Set(ctx, k, "x", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, e, bank, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionTrue, v1alpha1.ReasonCountersProtected)
	if refused := r.adminRefusals(ctx, t); len(refused) > 0 {
		t.Errorf("the administrative user was refused %v", refused)
	}
}

// TestCountersProtectedWithoutGrants: a manager holding the sidecars' shared user (no
// tenant users) cannot read the settings: CountersProtected is Unknown (MissingGrants),
// naming the ACL rules it lacks, without an event, and Ready is True.
func TestCountersProtectedWithoutGrants(t *testing.T) {
	e := suite(t)
	const user, password = "ratelimit", "shared-pa55-envtest"
	srv := redistest.StartServer(t, redistest.WithACLConf(t, aclConfPath(), map[string]redistest.ACLUser{user: {Password: password}}))
	o := redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{srv.Addr()},
		CredentialsPath: redistest.CredentialsDir(t, user, password)}
	rdb, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	ns := kube.NewNamespace(t, e, "mem-")
	replaceShared(t, func() (*manager, error) { return startManager(e, rdb, o.Topology(), ns) })
	create(t, e, newPolicy(ns, "api", 10))
	p := waitCondition(t, e, ns, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionUnknown, v1alpha1.ReasonMissingGrants)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionCountersProtected); !strings.Contains(c.Message,
		"lacks +config|get +info") {
		t.Errorf("message %q; want the missing rules named", c.Message)
	}
	waitReady(t, e, ns, "api")
	checkHealthyEvents(t, e, ns, "api")
}

// configSet changes a setting of the server, as the default user.
func configSet(t testing.TB, s *redistest.Server, name, value string) {
	t.Helper()
	if err := s.Client().ConfigSet(context.Background(), name, value).Err(); err != nil {
		t.Fatalf("CONFIG SET %s %s: %v", name, value, err)
	}
}

// checkEventType checks that every event of the policy with the reason has the type.
func checkEventType(t testing.TB, e *kube.Env, ns, name, reason, typ string) {
	t.Helper()
	wait.Eventually(t, readyTimeout, reason+" events of type "+typ, func() error {
		evs, err := policyEvents(e, ns, name)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Reason == reason && ev.Type != typ {
				return fmt.Errorf("%s event of type %s: %s", reason, ev.Type, ev.Note)
			}
		}
		return nil
	})
}
