package install

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestKustomizeDefaultRBAC: config/default gives the manager Deployment its own service
// account, bound to the generated manager ClusterRole and to a namespaced leader-election
// Role (Leases only in the operator's namespace), and the API server accepts all of it.
func TestKustomizeDefaultRBAC(t *testing.T) {
	r := renderDefault(t)
	const sa = "ratelimit-controller-manager"

	dep := managerDeployment(t, r)
	if dep.Spec.Template.Spec.ServiceAccountName != sa {
		t.Errorf("manager runs as %q, want %q", dep.Spec.Template.Spec.ServiceAccountName, sa)
	}
	if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
		t.Errorf("manager args %v lack --leader-elect", dep.Spec.Template.Spec.Containers[0].Args)
	}

	account := decoded[corev1.ServiceAccount](t, r, "ServiceAccount", sa)
	cr := decoded[rbacv1.ClusterRole](t, r, "ClusterRole", "ratelimit-manager-role")
	crb := decoded[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "ratelimit-manager-rolebinding")
	role := decoded[rbacv1.Role](t, r, "Role", "ratelimit-leader-election-role")
	rb := decoded[rbacv1.RoleBinding](t, r, "RoleBinding", "ratelimit-leader-election-rolebinding")
	secrets := decoded[rbacv1.Role](t, r, "Role", "ratelimit-manager-role")
	srb := decoded[rbacv1.RoleBinding](t, r, "RoleBinding", "ratelimit-manager-namespace-rolebinding")

	for _, b := range []struct {
		name     string
		subjects []rbacv1.Subject
		roleRef  rbacv1.RoleRef
		want     string
	}{
		{crb.Name, crb.Subjects, crb.RoleRef, cr.Name},
		{rb.Name, rb.Subjects, rb.RoleRef, role.Name},
		{srb.Name, srb.Subjects, srb.RoleRef, secrets.Name},
	} {
		if len(b.subjects) != 1 || b.subjects[0].Name != sa || b.subjects[0].Namespace != installNamespace || b.roleRef.Name != b.want {
			t.Errorf("%s binds %+v to %s, want %s/%s to %s", b.name, b.subjects, b.roleRef.Name, installNamespace, sa, b.want)
		}
	}
	checkLeaderElectionRole(t, role)
	checkSecretsRole(t, secrets)

	dryRunRendered(t, r, account, cr, crb, role, rb, secrets, srb)
}

// checkSecretsRole: the manager's namespaced Role reads Secrets (RedisBackends' credentials)
// in the operator's namespace only, by get: no list, no watch, nothing else.
func checkSecretsRole(t *testing.T, role *rbacv1.Role) {
	t.Helper()
	if role.Namespace != installNamespace {
		t.Errorf("manager Role in %q, want the operator's namespace %q", role.Namespace, installNamespace)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("manager Role grants %+v, want only get on Secrets", role.Rules)
	}
}

// checkLeaderElectionRole: namespaced to the operator, leases and events only.
func checkLeaderElectionRole(t *testing.T, role *rbacv1.Role) {
	t.Helper()
	if role.Namespace != installNamespace {
		t.Errorf("leader-election Role in %q, want the operator's namespace %q", role.Namespace, installNamespace)
	}
	for _, rule := range role.Rules {
		for _, res := range rule.Resources {
			if res != "leases" && res != "events" {
				t.Errorf("leader-election Role grants %q; it needs only leases and events", res)
			}
		}
	}
}
