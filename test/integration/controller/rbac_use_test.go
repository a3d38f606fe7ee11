package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// rbacUsed is every permission the manager's code uses, as "group/resource" (or
// "group/resource@name" for a rule limited to resourceNames [name]) -> verbs, each justified
// by the call in internal/controller or cmd/manager that needs it. The generated
// ClusterRole (config/rbac/role.yaml) must grant exactly this.
var rbacUsed = map[string][]string{
	// publishing.Reconciler: Get in write and read (a client.Reader call; served by the
	// cache today), the cache's List+Watch (Watches ConfigMap; List in Redises.reloaded), Create and
	// Update in write, Delete in remove. Nothing patches a ConfigMap.
	"/configmaps": {"create", "delete", "get", "list", "update", "watch"},
	// The events.k8s.io recorder (mgr.GetEventRecorder): Create, and Patch for a series.
	"events.k8s.io/events": {"create", "patch"},
	// ratelimitpolicy.Reconciler: Get in Reconcile, the cache's List+Watch (For, List in requests and
	// Sync), Update to add and remove the finalizer. Nothing patches the main resource.
	"policy.ratelimit.dev/ratelimitpolicies": {"get", "list", "update", "watch"},
	// patchStatus: Status().Patch. Nothing gets or updates the status subresource.
	"policy.ratelimit.dev/ratelimitpolicies/status": {"patch"},
	// ratelimitoverride.Reconciler: Get in Reconcile, the cache's List+Watch (For, List in
	// overridesIn; publishing.Reconciler's Watches and List in sync). Nothing writes an override.
	"policy.ratelimit.dev/ratelimitoverrides": {"get", "list", "watch"},
	// ratelimitoverride.Reconciler.Reconcile: Status().Patch, and nothing else of the status.
	"policy.ratelimit.dev/ratelimitoverrides/status": {"patch"},
	// Per-namespace Redis users (--redis-tenant-users), tenancy.Reconciler: Create of a
	// namespace's credentials Secret in create. The API server authorizes a create before
	// the object (and its name) exists, so this one verb cannot be limited to the name.
	"/secrets": {"create"},
	// ... and only the Secrets of that name (the default of --redis-tenant-secret-name):
	// Get through the uncached API reader in secret (every step starts from the API
	// server's copy), the cache's List+Watch (For Secret, field selector metadata.name,
	// which the API server authorizes against resourceNames; List where the API server
	// cannot stream the initial list over the watch), Update to rotate, retire a
	// password, mark and unmark the grace before deletion and replace hand-edited
	// credentials, Delete in deleteSecret. No other Secret can be read. Nothing patches one.
	"/secrets@ratelimit-redis-credentials": {"delete", "get", "list", "update", "watch"},
	// Gateway API attachment (internal/controller/gatewayapi: reader.go, dataplane.go), used only
	// when the API server serves Gateway API: the cache's List+Watch of Gateways, HTTPRoutes
	// and GRPCRoutes (Watches; List in inputs and RouteNamespaces; Get of another
	// namespace's parent Gateway, served by the cache) and of GatewayClasses (Get in
	// DataPlane.implementation, served by the cache). Nothing writes them.
	"gateway.networking.k8s.io/gateways":       {"list", "watch"},
	"gateway.networking.k8s.io/httproutes":     {"list", "watch"},
	"gateway.networking.k8s.io/grpcroutes":     {"list", "watch"},
	"gateway.networking.k8s.io/gatewayclasses": {"list", "watch"},
	// DataPlane, in the policy's namespace: Get through the uncached reader in apply (is the
	// name free, or ours?), server-side apply (Patch; Create when the object is new), List
	// through the uncached reader and Delete in prune. No watch: nothing caches them.
	"gateway.envoyproxy.io/securitypolicies":  {"create", "delete", "get", "list", "patch"},
	"security.istio.io/authorizationpolicies": {"create", "delete", "get", "list", "patch"},
	// The data plane objects' owner reference sets blockOwnerDeletion, which the API server
	// (OwnerReferencesPermissionEnforcement) allows only to whoever may update the owner's
	// finalizers. The finalizer itself is set through an Update of the policy.
	"policy.ratelimit.dev/ratelimitpolicies/finalizers": {"update"},
	// redisbackend.Reconciler: Get in Reconcile, the cache's List+Watch (For and Watches,
	// List in allBackends and setNamespaces; Redises.Route and Named read them from the
	// cache; the snapshot and tenant controllers watch them too). Nothing writes one.
	"policy.ratelimit.dev/redisbackends": {"get", "list", "watch"},
	// redisbackend.Reconciler.patchStatus: Status().Patch, and nothing else of the status.
	"policy.ratelimit.dev/redisbackends/status": {"patch"},
	// Which Redis serves a namespace reads its labels: the cache's List+Watch of the
	// namespaces' metadata (Watches with OnlyMetadata in the RedisBackend, snapshot and
	// tenant controllers; Get in Redises.Route and List in setNamespaces, served by it).
	"/namespaces": {"list", "watch"},
}

// rbacUsedInNamespace is what the manager's namespaced Role (the second document of
// config/rbac/role.yaml, bound in the operator's namespace only) must grant exactly: the
// redisbackend.Reconciler's Get of the Secrets a backend names (credentials, CA), through
// the uncached API reader. No list, no watch: the manager caches no such Secret.
var rbacUsedInNamespace = map[string][]string{"/secrets": {"get"}}

// TestRBACUseGeneratedRoles: the manager binary, acting as a service account bound to
// exactly config/rbac/role.yaml (ClusterRole) and config/rbac/leader_election_role.yaml
// (Role in its own namespace) as the *_binding.yaml files bind them, reconciles policies to
// Ready and publishes their snapshot, with no request refused. Then it runs again bound to
// rbacUsed only (create, update and delete of a policy and its snapshot, every verb of the
// table), showing the table is enough; an in-process leader-elected manager shows the
// leader-election Role is enough for the Lease and its events. Last, role.yaml must hold
// exactly rbacUsed.
//
// The identity is impersonated (kubeconfig "as" the service account): the API server
// authorizes it exactly as a token of that account (user system:serviceaccount:<ns>:<name>,
// groups system:serviceaccounts, system:serviceaccounts:<ns>, system:authenticated).
func TestRBACUseGeneratedRoles(t *testing.T) {
	e := isolatedEnv(t)
	rds := redistest.StartServer(t, adminACL(t))
	system := kube.NewNamespace(t, e, "rbac-system-")
	role := installManagerRBAC(t, e, system)
	user := "system:serviceaccount:" + system + ":controller-manager"
	saConfig := rest.CopyConfig(e.Config)
	saConfig.Impersonate = rest.ImpersonationConfig{UserName: user}
	checkImpersonated(t, saConfig, system)
	kubeconfig := writeKubeconfig(t, e.Config, user)
	// Per-namespace users on, as the administrative user: every Secret verb of the table.
	args := []string{"--redis-addrs", rds.Addr(), "--script-resync", "1s", "--redis-tenant-users",
		"--redis-tenant-password-grace", tenantGrace.String(),
		"--redis-credentials-path", redistest.CredentialsDir(t, tenantAdmin, tenantAdminPassword)}

	// role.yaml as generated.
	m1 := startBinManager(t, kubeconfig, args...)
	ns := kube.NewNamespace(t, e, "rbac-")
	names := []string{"one", "two"}
	for i, name := range names {
		create(t, e, newPolicy(ns, name, int64(10+i)))
	}
	for _, name := range names {
		waitReady(t, e, ns, name)
	}
	waitSnapshot(t, e, ns, names...)
	waitCredentials(t, e, ns)
	exerciseBackend(t, e, system)
	checkNotForbidden(t, m1, "with role.yaml")
	m1.term(t)

	// rbacUsed only: the whole lifecycle in a second namespace.
	role.Rules = rulesOf(rbacUsed)
	if err := e.Client.Update(context.Background(), role); err != nil {
		t.Fatal(err)
	}
	// Informers stream their initial list over the watch (client-go's WatchListClient) where
	// the API server can, and LIST where it cannot (older servers): make this run LIST, so
	// the table is shown enough for both.
	m2 := startBinManagerEnv(t, []string{"KUBE_FEATURE_WatchListClient=false"}, kubeconfig, args...)
	exerciseLifecycle(t, e, kube.NewNamespace(t, e, "rbac-min-"), rds)
	checkNotForbidden(t, m2, "with only the used permissions")
	m2.term(t)

	checkLeaderElectionRole(t, e, saConfig, rds, system)
	checkRoleIsUsed(t)
}

// exerciseBackend uses the RedisBackend permissions: a backend whose administrative
// credentials live in the manager's namespace system (read with the namespaced Role) serves
// a labelled namespace, its status written; the namespace's snapshot names its Redis.
func exerciseBackend(t *testing.T, e *kube.Env, system string) {
	t.Helper()
	srv := redistest.StartServer(t, adminACL(t))
	ns := kube.NewNamespace(t, e, "rbac-backend-")
	labelNamespace(t, e, ns, ns)
	name := "rbac-" + ns
	newBackend(t, e, name, srv.Addr(), adminCredentials(t, e, system), ns)
	readyPolicy(t, e, ns, "isolated")
	waitBackend(t, e, name, "Ready, serving its namespace", servingReady(ns))
	if _, s := waitSnapshot(t, e, ns, "isolated"); !slices.Equal(s.Redis.Addrs, []string{srv.Addr()}) {
		t.Errorf("the snapshot names Redis %v, want the backend's %s", s.Redis.Addrs, srv.Addr())
	}
}

// installManagerRBAC creates config/rbac's service account, ClusterRole, Role and bindings,
// with the service account and Role in ns and the cluster-scoped names made unique, and
// returns the ClusterRole.
func installManagerRBAC(t testing.TB, e *kube.Env, ns string) *rbacv1.ClusterRole {
	t.Helper()
	var sa corev1.ServiceAccount
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	var leRole, nsRole rbacv1.Role
	var leBinding, nsBinding rbacv1.RoleBinding
	readManifest(t, "service_account.yaml", &sa)
	readManifest(t, "role.yaml", &role)
	readDocument(t, "role.yaml", "Role", &nsRole)
	readManifest(t, "role_binding.yaml", &binding)
	readManifest(t, "namespace_role_binding.yaml", &nsBinding)
	readManifest(t, "leader_election_role.yaml", &leRole)
	readManifest(t, "leader_election_role_binding.yaml", &leBinding)

	sa.Namespace, leRole.Namespace, leBinding.Namespace, nsRole.Namespace, nsBinding.Namespace = ns, ns, ns, ns, ns
	role.Name += "-" + ns
	binding.Name += "-" + ns
	binding.RoleRef.Name = role.Name
	if nsBinding.RoleRef.Kind != "Role" || nsBinding.RoleRef.Name != nsRole.Name {
		t.Fatalf("the namespaced binding refers to %s %s, not Role %s", nsBinding.RoleRef.Kind, nsBinding.RoleRef.Name, nsRole.Name)
	}
	for _, subjects := range [][]rbacv1.Subject{binding.Subjects, leBinding.Subjects, nsBinding.Subjects} {
		for i := range subjects {
			if subjects[i].Kind != rbacv1.ServiceAccountKind || subjects[i].Name != sa.Name {
				t.Fatalf("binding subject %+v is not the manager's service account %s", subjects[i], sa.Name)
			}
			subjects[i].Namespace = ns
		}
	}
	if leBinding.RoleRef.Name != leRole.Name {
		t.Fatalf("leader election binding refers to %s, not %s", leBinding.RoleRef.Name, leRole.Name)
	}
	create(t, e, &sa, &role, &binding, &leRole, &leBinding, &nsRole, &nsBinding)
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), &binding)
		_ = e.Client.Delete(context.Background(), &role)
	})
	return &role
}

// readManifest decodes config/rbac/<name>, its first document when it has several.
func readManifest(t testing.TB, name string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "config", "rbac", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("decode config/rbac/%s: %v", name, err)
	}
}

// readDocument decodes the document of config/rbac/<name> whose kind is kind.
func readDocument(t testing.TB, name, kind string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "config", "rbac", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != kind {
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("decode the %s of config/rbac/%s: %v", kind, name, err)
		}
		return
	}
	t.Fatalf("config/rbac/%s holds no %s", name, kind)
}

// checkImpersonated makes sure the impersonated identity is not the admin: it may not read
// Secrets.
func checkImpersonated(t testing.TB, cfg *rest.Config, ns string) {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	err = c.List(context.Background(), &corev1.SecretList{}, client.InNamespace(ns))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the service account listed Secrets (err %v): impersonation is not in effect", err)
	}
}

// checkNotForbidden fails when the manager logged a refused request.
func checkNotForbidden(t testing.TB, m *binManager, when string) {
	t.Helper()
	for _, line := range strings.Split(m.output(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("manager %s was refused a request: %s", when, line)
		}
	}
}

// exerciseLifecycle uses every permission of the table: a policy is created (finalizer
// update, status patch, snapshot create, event create, credentials Secret create), its
// password rotated (Secret get, watch, update), the policy changed (snapshot update), and
// deleted (snapshot delete, finalizer removal, Secret update and delete).
func exerciseLifecycle(t *testing.T, e *kube.Env, ns string, rds *redistest.Server) {
	t.Helper()
	readyPolicy(t, e, ns, "life")
	waitSnapshot(t, e, ns, "life")
	rotateOnce(t, e, ns, rds)
	setRequests(t, e, ns, "life", 20)
	wait.Eventually(t, readyTimeout, "changed policy published", func() error {
		_, s, err := getSnapshot(e, ns)
		if err != nil {
			return err
		}
		if len(s.Policies) != 1 || s.Policies[0].Limits[0].Requests != 20 {
			return fmt.Errorf("snapshot policies %+v", s.Policies)
		}
		return nil
	})
	p := waitReady(t, e, ns, "life")
	if err := e.Client.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	waitNoSnapshot(t, e, ns)
	wait.Eventually(t, readyTimeout, "credentials Secret removed after the grace", func() error {
		if getSecret(t, e, ns) != nil {
			return errors.New("still there")
		}
		return nil
	})
	wait.Eventually(t, readyTimeout, "policy finalized", func() error {
		_, err := getPolicy(e, ns, "life")
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %w)", err)
	})
	wait.Eventually(t, readyTimeout, "event about the policy", func() error {
		evs, err := policyEvents(e, ns, "life")
		if err == nil && len(evs) == 0 {
			err = errors.New("none")
		}
		return err
	})
}

// rotateOnce asks for a new password and waits until the old one is retired.
func rotateOnce(t *testing.T, e *kube.Env, ns string, rds *redistest.Server) {
	t.Helper()
	before := waitCredentials(t, e, ns)
	askRotation(t, e, before, "rbac")
	after := waitRotated(t, e, ns, before, "rbac")
	r := &tenantRedis{servers: []*redistest.Server{rds}}
	wait.Eventually(t, tenantGrace+readyTimeout, "previous password retired", func() error {
		if s := getSecret(t, e, ns); s == nil || s.Annotations[tenancy.AnnotationRetiringHash] != "" {
			return errors.New("the Secret still names a retiring password")
		}
		return r.userEverywhere(context.Background(), t, tenantPrefix+ns, string(after.Data["password"]))
	})
}

// checkLeaderElectionRole runs a leader-elected manager as the service account with its
// lease in the Role's namespace: it is elected, holds the Lease, and records its
// LeaderElection event (core/v1, which the Role grants).
func checkLeaderElectionRole(t *testing.T, e *kube.Env, cfg *rest.Config, rds *redistest.Server, ns string) {
	t.Helper()
	topo := redisconn.Topology{Mode: redisconn.ModeStandalone, Addrs: []string{rds.Addr()}}
	m := startElectable(t, cfg, rds.Client(), topo, ns, "rbac-leader")
	waitElected(t, m.manager, 30*time.Second)
	var lease coordinationv1.Lease
	if err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: leaseName}, &lease); err != nil {
		t.Fatalf("lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %s has no holder", leaseName)
	}
	wait.Eventually(t, readyTimeout, "leader election event", func() error {
		var list corev1.EventList
		if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == "LeaderElection" && ev.InvolvedObject.Name == leaseName {
				return nil
			}
		}
		return fmt.Errorf("%d events, none about the lease", len(list.Items))
	})
	m.stop()
}

// checkRoleIsUsed fails when config/rbac/role.yaml's ClusterRole grants more or less than
// rbacUsed, or its namespaced Role more or less than rbacUsedInNamespace.
func checkRoleIsUsed(t *testing.T) {
	t.Helper()
	var role rbacv1.ClusterRole
	readManifest(t, "role.yaml", &role)
	checkRulesAreUsed(t, "ClusterRole", role.Rules, rbacUsed)
	var nsRole rbacv1.Role
	readDocument(t, "role.yaml", "Role", &nsRole)
	checkRulesAreUsed(t, "Role", nsRole.Rules, rbacUsedInNamespace)
}

// checkRulesAreUsed fails when rules grant more or less than table.
func checkRulesAreUsed(t *testing.T, kind string, rules []rbacv1.PolicyRule, table map[string][]string) {
	t.Helper()
	granted := map[string]bool{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 1 {
			t.Errorf("rule %+v: nonResourceURLs and several resourceNames are not in the table", r)
		}
		for _, p := range grants(r) {
			granted[p] = true
		}
	}
	used := map[string]bool{}
	for res, verbs := range table {
		for _, v := range verbs {
			used[res+" "+v] = true
		}
	}
	var extra, missing []string
	for p := range granted {
		if !used[p] {
			extra = append(extra, p)
		}
	}
	for p := range used {
		if !granted[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if len(extra) > 0 {
		t.Errorf("the %s of config/rbac/role.yaml grants what no code path uses: %s\n"+
			"(drop them from the +kubebuilder:rbac markers and run `make manifests`)", kind, strings.Join(extra, ", "))
	}
	if len(missing) > 0 {
		t.Errorf("the %s of config/rbac/role.yaml lacks what the code uses: %s", kind, strings.Join(missing, ", "))
	}
}

// grants are the rule's permissions as "<table key> <verb>".
func grants(r rbacv1.PolicyRule) []string {
	names := r.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	var out []string
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, name := range names {
				for _, v := range r.Verbs {
					out = append(out, tableKey(g, res, name)+" "+v)
				}
			}
		}
	}
	return out
}

// rulesOf turns the table into ClusterRole rules.
func rulesOf(table map[string][]string) []rbacv1.PolicyRule {
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]rbacv1.PolicyRule, 0, len(keys))
	for _, k := range keys {
		group, resource, _ := strings.Cut(k, "/")
		res, name, _ := strings.Cut(resource, "@")
		rule := rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{res}, Verbs: slices.Clone(table[k])}
		if name != "" {
			rule.ResourceNames = []string{name}
		}
		out = append(out, rule)
	}
	return out
}

// tableKey is the rbacUsed key of a rule: "group/resource", with "@name" when limited to
// one resource name.
func tableKey(group, resource, name string) string {
	if name == "" {
		return group + "/" + resource
	}
	return group + "/" + resource + "@" + name
}
