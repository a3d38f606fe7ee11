package install

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/source"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
)

// Names the install manifests use.
const (
	sidecarName    = "ratelimit-sidecar"
	snapshotName   = "ratelimit-snapshot"
	snapshotKey    = "snapshot.json"
	managerSA      = "ratelimit-controller-manager"
	metricsService = "ratelimit-controller-manager-metrics-service"
	redisAddrs     = "redis.ratelimit-system.svc:6379"
	credsSecret    = "ratelimit-redis-credentials"
	installOwner   = "install-test"
)

// Kustomizations under config/ that users apply.
var (
	sidecarDir    = filepath.Join("config", "sidecar")
	exampleAppDir = filepath.Join("config", "samples", "example-app-sidecar")
	injectedDir   = filepath.Join("config", "samples", "example-app")
	envoyDir      = filepath.Join("config", "samples", "envoy")
)

// notServed are the API groups whose CRDs the envtest API server lacks (cert-manager's and the
// prometheus-operator's): their objects are skipped by applyDryRun and checked by reading them.
var notServed = map[string]bool{"cert-manager.io": true, "monitoring.coreos.com": true}

// renderDir runs `kubectl kustomize dir` (relative to the repository, or absolute) and returns
// the documents by kind and name and, in order, as objects.
func renderDir(t *testing.T, dir string) (rendered, []*unstructured.Unstructured) {
	t.Helper()
	r := rendered{}
	var objs []*unstructured.Unstructured
	for _, d := range manifests.Kustomize(t, dir) {
		u := d.Object
		if r[u.GetKind()] == nil {
			r[u.GetKind()] = map[string][]byte{}
		}
		r[u.GetKind()][u.GetName()] = d.Raw
		objs = append(objs, u)
	}
	return r, objs
}

// applyDryRun server-side applies every object (dry run, like `kubectl apply --server-side
// --dry-run=server`) and fails on a refusal or any warning: PodSecurity's for a pod template
// that breaks the namespace's level, the webhook's for a policy. Namespaced objects without a
// namespace go into ns, as `kubectl apply -n ns` puts them. It returns the kinds it skipped.
func applyDryRun(t *testing.T, c client.Client, warnings *kube.WarningLog, ns string, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var skipped []string
	for _, obj := range objs {
		u := obj.DeepCopy()
		if notServed[u.GroupVersionKind().Group] {
			skipped = append(skipped, u.GetKind())
			continue
		}
		if ns != "" && u.GetNamespace() == "" {
			namespaced, err := c.IsObjectNamespaced(u)
			if err != nil {
				t.Fatalf("scope of %s: %v", u.GetKind(), err)
			}
			if namespaced {
				u.SetNamespace(ns)
			}
		}
		err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(installOwner), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("API server refuses %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		if w := warnings.Take(); len(w) > 0 {
			t.Errorf("%s %s/%s drew warnings: %q", u.GetKind(), u.GetNamespace(), u.GetName(), w)
		}
	}
	return skipped
}

// restrictedNamespace creates a test namespace that enforces and warns about the "restricted"
// Pod Security Standard, as an app namespace of a careful platform team would.
func restrictedNamespace(t *testing.T, e *kube.Env) string {
	t.Helper()
	ns := kube.NewNamespace(t, e, "install-")
	obj := &corev1.Namespace{}
	if err := e.Client.Get(context.Background(), client.ObjectKey{Name: ns}, obj); err != nil {
		t.Fatalf("get namespace: %v", err)
	}
	obj.Labels = map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}
	if err := e.Client.Update(context.Background(), obj); err != nil {
		t.Fatalf("label namespace: %v", err)
	}
	return ns
}

// ensureInstallNamespace creates config/default's namespace for real, as rendered (with its
// Pod Security labels), so namespaced objects can be dry-run into it.
func ensureInstallNamespace(t *testing.T, c client.Client, r rendered) {
	t.Helper()
	ns := &corev1.Namespace{}
	r.get(t, "Namespace", installNamespace, ns)
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", installNamespace, err)
	}
}

// TestInstallDefaultServerSideApply: everything config/default renders is accepted by the API
// server without a single warning (its namespace warns about the restricted Pod Security
// level), except cert-manager's Issuer and Certificate, whose CRDs envtest lacks. The optional
// ServiceMonitor is not part of it, so the one-command install needs no prometheus-operator.
func TestInstallDefaultServerSideApply(t *testing.T) {
	e := suite.Env(t)
	c, warnings := kube.NewWarningClient(t, e)
	r, objs := renderDir(t, filepath.Join("config", "default"))
	var ns corev1.Namespace
	r.get(t, "Namespace", installNamespace, &ns)
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s labels %v: want pod-security.kubernetes.io/enforce=restricted", installNamespace, ns.Labels)
	}
	ensureInstallNamespace(t, c, r)
	skipped := applyDryRun(t, c, warnings, "", objs)
	slices.Sort(skipped)
	if !slices.Equal(skipped, []string{"Certificate", "Issuer"}) {
		t.Errorf("skipped %v; want only cert-manager's Certificate and Issuer", skipped)
	}
	if len(r["ServiceMonitor"]) != 0 {
		t.Errorf("config/default renders a ServiceMonitor; it must stay opt-in (config/prometheus)")
	}

	// The check is live: a manager that may escalate privileges draws PodSecurity's warning.
	dep := managerDeployment(t, r)
	dep.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	if err := c.Create(context.Background(), dep, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	kube.AssertWarning(t, warnings.Take(), `PodSecurity "restricted`, "allowPrivilegeEscalation")
}

// TestInstallManagerDeployment: the manager is hardened (every container), elects a leader,
// serves metrics on :8443 once, reaches the placeholder Redis, and mounts the optional
// credentials Secret where --redis-credentials-path would read it.
func TestInstallManagerDeployment(t *testing.T) {
	r, _ := renderDir(t, filepath.Join("config", "default"))
	dep := managerDeployment(t, r)
	checkHardened(t, "Deployment "+dep.Name, dep.Spec.Template.Spec)
	mgr := dep.Spec.Template.Spec.Containers[0]

	for flag, want := range map[string]string{
		"metrics-bind-address": ":8443",
		"redis-mode":           "standalone",
		"redis-addrs":          redisAddrs,
	} {
		if got := flagValues(mgr.Args, flag); len(got) != 1 || got[0] != want {
			t.Errorf("manager --%s %q, want exactly %q", flag, got, want)
		}
	}
	if !slices.Contains(mgr.Args, "--leader-elect") {
		t.Errorf("manager args %v lack --leader-elect", mgr.Args)
	}
	if !hasPort(mgr, 8443) {
		t.Errorf("manager does not declare the metrics port 8443: %+v", mgr.Ports)
	}

	mount, vol := mountOf(dep.Spec.Template.Spec, mgr, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == credsSecret
	})
	switch {
	case vol == nil:
		t.Errorf("no volume from Secret %s in %+v", credsSecret, dep.Spec.Template.Spec.Volumes)
	case vol.Secret.Optional == nil || !*vol.Secret.Optional:
		t.Errorf("credentials Secret volume is not optional: the manager would not start without it")
	case mount == nil || !mount.ReadOnly:
		t.Errorf("credentials Secret not mounted read-only: %+v", mount)
	}
	if got := flagValues(mgr.Args, "redis-credentials-path"); len(got) > 0 && (mount == nil || got[len(got)-1] != mount.MountPath) {
		t.Errorf("--redis-credentials-path %q is not where the Secret is mounted (%+v)", got, mount)
	}
}

// TestInstallMetricsServiceAndRBAC: the metrics Service reaches the manager's :8443 as "https";
// the manager may create TokenReviews and SubjectAccessReviews (to check scrapers) and nothing
// else through that role; scrapers get GET /metrics from metrics-reader; and the helper roles
// for people are what they claim.
func TestInstallMetricsServiceAndRBAC(t *testing.T) {
	r, _ := renderDir(t, filepath.Join("config", "default"))
	var svc corev1.Service
	r.get(t, "Service", metricsService, &svc)
	dep := managerDeployment(t, r)
	if svc.Namespace != installNamespace || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) ||
		len(svc.Spec.Selector) == 0 {
		t.Errorf("metrics Service %s/%s selector %v does not select the manager pods %v", svc.Namespace, svc.Name,
			svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 8443 ||
		svc.Spec.Ports[0].TargetPort != intstr.FromInt32(8443) {
		t.Errorf("metrics Service ports %+v: want https 8443 -> 8443", svc.Spec.Ports)
	}

	var auth rbacv1.ClusterRole
	r.get(t, "ClusterRole", "ratelimit-metrics-auth-role", &auth)
	wantAuth := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	if !rulesEqual(auth.Rules, wantAuth) {
		t.Errorf("metrics auth role rules %+v, want exactly %+v", auth.Rules, wantAuth)
	}
	var authBinding rbacv1.ClusterRoleBinding
	r.get(t, "ClusterRoleBinding", "ratelimit-metrics-auth-rolebinding", &authBinding)
	if authBinding.RoleRef.Name != auth.Name || len(authBinding.Subjects) != 1 ||
		authBinding.Subjects[0].Name != managerSA || authBinding.Subjects[0].Namespace != installNamespace {
		t.Errorf("metrics auth binding %+v -> %s, want %s/%s -> %s", authBinding.Subjects, authBinding.RoleRef.Name,
			installNamespace, managerSA, auth.Name)
	}
	var reader rbacv1.ClusterRole
	r.get(t, "ClusterRole", "ratelimit-metrics-reader", &reader)
	if !rulesEqual(reader.Rules, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}) {
		t.Errorf("metrics-reader rules %+v, want only get on /metrics", reader.Rules)
	}
	checkHelperRoles(t, r)
}

// checkHelperRoles: the editor roles may write policies or overrides but not their status,
// and are not aggregated into edit/admin (who may write limits is the platform's call); the
// viewers only read, and the override viewer is not aggregated into view either (an
// override may name callers by their API key, and view reads no Secrets).
func checkHelperRoles(t *testing.T, r rendered) {
	t.Helper()
	var editor, viewer, oEditor, oViewer rbacv1.ClusterRole
	r.get(t, "ClusterRole", "ratelimit-ratelimitpolicy-editor-role", &editor)
	r.get(t, "ClusterRole", "ratelimit-ratelimitpolicy-viewer-role", &viewer)
	r.get(t, "ClusterRole", "ratelimit-ratelimitoverride-editor-role", &oEditor)
	r.get(t, "ClusterRole", "ratelimit-ratelimitoverride-viewer-role", &oViewer)
	for _, role := range []rbacv1.ClusterRole{editor, oEditor, oViewer} {
		for k := range role.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
				t.Errorf("%s is aggregated (%s): anyone with that built-in role in a namespace would get it", role.Name, k)
			}
		}
	}
	for _, role := range []rbacv1.ClusterRole{editor, viewer, oEditor, oViewer} {
		checkRoleRules(t, role, role.Name == viewer.Name || role.Name == oViewer.Name)
	}
	if !slices.ContainsFunc(oEditor.Rules, func(rule rbacv1.PolicyRule) bool {
		return slices.Contains(rule.Resources, "ratelimitoverrides") && slices.Contains(rule.Verbs, "create")
	}) || slices.ContainsFunc(oEditor.Rules, func(rule rbacv1.PolicyRule) bool { return slices.Contains(rule.Resources, "ratelimitpolicies") }) {
		t.Errorf("override editor rules %+v: want create on ratelimitoverrides and nothing on policies", oEditor.Rules)
	}
}

// checkRoleRules: role grants only get on status, and only reads when readOnly.
func checkRoleRules(t *testing.T, role rbacv1.ClusterRole, readOnly bool) {
	t.Helper()
	for _, rule := range role.Rules {
		if slices.ContainsFunc(rule.Resources, func(res string) bool { return strings.HasSuffix(res, "/status") }) && !slices.Equal(rule.Verbs, []string{"get"}) {
			t.Errorf("%s grants %v on status; only the controller writes it", role.Name, rule.Verbs)
		}
		if readOnly && slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
			t.Errorf("viewer role %s grants %v", role.Name, rule.Verbs)
		}
	}
}

// TestInstallPrometheusOverlay follows the [PROMETHEUS] note of config/default (uncommenting
// its ../prometheus line in a copy of config/) and checks the ServiceMonitor: in the install
// namespace, selecting the metrics Service and nothing else, scraping its "https" port with a
// bearer token. Rendered only: envtest has no ServiceMonitor CRD.
func TestInstallPrometheusOverlay(t *testing.T) {
	r, objs := renderDir(t, enablePrometheus(t))
	_, plain := renderDir(t, filepath.Join("config", "default"))
	if len(objs) != len(plain)+2 {
		t.Errorf("enabling the overlay renders %d objects, want config/default's %d plus the ServiceMonitor and the PrometheusRule", len(objs), len(plain))
	}
	checkPrometheusRule(t, r)

	var sm serviceMonitor
	r.get(t, "ServiceMonitor", "ratelimit-controller-manager-metrics-monitor", &sm)
	var selected []string
	for name := range r["Service"] {
		var svc corev1.Service
		r.get(t, "Service", name, &svc)
		if svc.Namespace == sm.Metadata.Namespace && labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) {
			selected = append(selected, name)
		}
	}
	if sm.Metadata.Namespace != installNamespace || !slices.Equal(selected, []string{metricsService}) {
		t.Fatalf("ServiceMonitor in %q selects Services %v, want only %s/%s", sm.Metadata.Namespace, selected, installNamespace, metricsService)
	}
	var svc corev1.Service
	r.get(t, "Service", metricsService, &svc)
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port && p.Port == 8443 }) {
		t.Errorf("ServiceMonitor port %q is not the metrics Service's 8443 port (%+v)", ep.Port, svc.Spec.Ports)
	}
	if ep.Scheme != "https" || ep.Path != "/metrics" || ep.BearerTokenFile == "" {
		t.Errorf("endpoint %+v: want https /metrics with a bearer token", ep)
	}
	// As kubebuilder v4 scaffolds it: the manager's metrics certificate is self-signed.
	if !ep.TLSConfig.InsecureSkipVerify {
		t.Errorf("endpoint tlsConfig %+v: the manager's self-signed metrics certificate cannot be verified", ep.TLSConfig)
	}
}

// enablePrometheus copies config/ into a temporary directory, uncomments the one
// `#- ../prometheus` line of its default/kustomization.yaml as the note there says, and
// returns the copy's default directory.
func enablePrometheus(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "config")
	if err := os.CopyFS(root, os.DirFS(filepath.Join(kube.RepoRoot(), "config"))); err != nil {
		t.Fatalf("copy config/: %v", err)
	}
	kpath := filepath.Join(root, "default", "kustomization.yaml")
	raw, err := os.ReadFile(kpath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n#- ../prometheus\n"); n != 1 {
		t.Fatalf("config/default/kustomization.yaml has %d commented `#- ../prometheus` lines, want the one the note describes", n)
	}
	enabled := strings.Replace(string(raw), "\n#- ../prometheus\n", "\n- ../prometheus\n", 1)
	if err := os.WriteFile(kpath, []byte(enabled), 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(kpath)
}

// checkPrometheusRule: the overlay's PrometheusRule is in the install namespace and holds
// exactly the groups of the chart's alerts.yaml (the one source of the alerts; make
// manifests regenerates config/prometheus/prometheusrule.yaml from it).
func checkPrometheusRule(t *testing.T, r rendered) {
	t.Helper()
	var rule struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			Groups []any `json:"groups"`
		}
	}
	r.get(t, "PrometheusRule", "ratelimit-alerts", &rule)
	if rule.Metadata.Namespace != installNamespace {
		t.Errorf("PrometheusRule in namespace %q, want %q", rule.Metadata.Namespace, installNamespace)
	}
	src, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "charts", "ratelimit-operator", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Groups) == 0 || !reflect.DeepEqual(rule.Spec.Groups, want.Groups) {
		t.Errorf("PrometheusRule groups differ from charts/ratelimit-operator/files/alerts.yaml: run make manifests")
	}
}

// serviceMonitor is the part of a monitoring.coreos.com/v1 ServiceMonitor the test reads.
type serviceMonitor struct {
	Metadata struct{ Name, Namespace string }
	Spec     struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		}
		Endpoints []struct {
			Port, Path, Scheme string
			BearerTokenFile    string `json:"bearerTokenFile"`
			TLSConfig          struct {
				InsecureSkipVerify bool `json:"insecureSkipVerify"`
			} `json:"tlsConfig"`
		}
	}
}

// TestInstallSidecarRBACRendered: config/sidecar is a service account, a Role with exactly
// get/list/watch on the ConfigMap ratelimit-snapshot, and a RoleBinding between them, none of
// them namespaced (they land where `kubectl apply -k config/sidecar -n <ns>` puts them).
func TestInstallSidecarRBACRendered(t *testing.T) {
	r, objs := renderDir(t, sidecarDir)
	if len(objs) != 3 {
		t.Errorf("config/sidecar renders %d objects, want a ServiceAccount, a Role and a RoleBinding", len(objs))
	}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			t.Errorf("%s %s sets namespace %q; it must take the one it is applied to", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	var sa corev1.ServiceAccount
	r.get(t, "ServiceAccount", sidecarName, &sa)
	var role rbacv1.Role
	r.get(t, "Role", sidecarName, &role)
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{snapshotName}, Verbs: []string{"get", "list", "watch"}}}
	if !rulesEqual(role.Rules, want) {
		t.Errorf("sidecar Role rules %+v, want exactly %+v", role.Rules, want)
	}
	var rb rbacv1.RoleBinding
	r.get(t, "RoleBinding", sidecarName, &rb)
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name || len(rb.Subjects) != 1 ||
		rb.Subjects[0].Kind != rbacv1.ServiceAccountKind || rb.Subjects[0].Name != sa.Name || rb.Subjects[0].Namespace != "" {
		t.Errorf("sidecar RoleBinding %+v -> %+v, want the service account %s (same namespace) -> Role %s", rb.Subjects, rb.RoleRef, sa.Name, role.Name)
	}
}

// TestInstallSidecarRBACEnforced applies config/sidecar into a namespace for real and acts as
// its service account: it may get the snapshot ConfigMap and list/watch it with the
// metadata.name field selector (the sidecar's own WatchSource follows it, changes included),
// and is refused every other ConfigMap, an unfiltered list or watch, writes to the snapshot,
// the snapshot of another namespace, and Secrets.
func TestInstallSidecarRBACEnforced(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "install-rbac-")
	_, objs := renderDir(t, sidecarDir)
	ctx := context.Background()
	for _, o := range objs {
		u := o.DeepCopy()
		u.SetNamespace(ns)
		if err := e.Client.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	snap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshotName},
		Data: map[string]string{snapshotKey: `{"schemaVersion":1,"version":"a"}`}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"}, Data: map[string]string{"k": "v"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-secret"}, StringData: map[string]string{"k": "v"}}
	for _, o := range []client.Object{snap, other, secret} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}

	cs := impersonate(t, e, ns, sidecarName)
	cms := cs.CoreV1().ConfigMaps(ns)
	// The RBAC authorizer learns of new bindings through its informers: wait for the grant.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, snapshotName, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the sidecar's service account never got the snapshot ConfigMap: %v", err)
	}
	checkSidecarAllowed(t, cms)
	checkSidecarDenied(t, cs, ns)
	checkWatchSource(t, e, cs, snap)
}

// impersonate returns a clientset acting as the service account ns/name.
func impersonate(t *testing.T, e *kube.Env, ns, name string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

var snapshotSelector = "metadata.name=" + snapshotName

// checkSidecarAllowed: the snapshot ConfigMap can be listed and watched by name.
func checkSidecarAllowed(t *testing.T, cms typedcorev1.ConfigMapInterface) {
	t.Helper()
	ctx := context.Background()
	list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: snapshotSelector})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != snapshotName {
		t.Errorf("list with %s: %v (items %d); want the snapshot ConfigMap", snapshotSelector, err, itemCount(list))
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: snapshotSelector})
	if err != nil {
		t.Fatalf("watch with %s: %v", snapshotSelector, err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Added || !ok || cm.Name != snapshotName {
			t.Errorf("watch with %s: first event %s %T, want ADDED %s", snapshotSelector, ev.Type, ev.Object, snapshotName)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("watch with %s: no event in 10s", snapshotSelector)
	}
}

func itemCount(l *corev1.ConfigMapList) int {
	if l == nil {
		return 0
	}
	return len(l.Items)
}

// checkSidecarDenied: everything beyond reading the one ConfigMap is Forbidden.
func checkSidecarDenied(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	cms := cs.CoreV1().ConfigMaps(ns)
	denied := []struct {
		what string
		do   func(ctx context.Context) error
	}{
		{"get another ConfigMap", func(ctx context.Context) error {
			_, err := cms.Get(ctx, "app-config", metav1.GetOptions{})
			return err
		}},
		{"list every ConfigMap", func(ctx context.Context) error {
			_, err := cms.List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list another ConfigMap by name", func(ctx context.Context) error {
			_, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=app-config"})
			return err
		}},
		{"watch every ConfigMap", func(ctx context.Context) error {
			w, err := cms.Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"update the snapshot", func(ctx context.Context) error {
			_, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshotName},
				Data: map[string]string{snapshotKey: "{}"}}, metav1.UpdateOptions{})
			return err
		}},
		{"delete the snapshot", func(ctx context.Context) error {
			return cms.Delete(ctx, snapshotName, metav1.DeleteOptions{})
		}},
		{"create a ConfigMap", func(ctx context.Context) error {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}}, metav1.CreateOptions{})
			return err
		}},
		{"get the snapshot of another namespace", func(ctx context.Context) error {
			_, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, snapshotName, metav1.GetOptions{})
			return err
		}},
		{"get a Secret", func(ctx context.Context) error {
			_, err := cs.CoreV1().Secrets(ns).Get(ctx, "app-secret", metav1.GetOptions{})
			return err
		}},
		{"list Secrets", func(ctx context.Context) error {
			_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
	}
	for _, d := range denied {
		if err := d.do(context.Background()); !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", d.what, err)
		}
	}
}

// recordingSink records what a snapshot source loads.
type recordingSink struct{ loads chan string }

// Load implements source.Sink.
func (s *recordingSink) Load(data []byte, _ string) error {
	s.loads <- string(data)
	return nil
}

// checkWatchSource runs the sidecar's own ConfigMap watch as the service account: it loads the
// snapshot, follows an update, and reports no error (a Forbidden list or watch would show).
func checkWatchSource(t *testing.T, e *kube.Env, cs kubernetes.Interface, snap *corev1.ConfigMap) {
	t.Helper()
	sink := &recordingSink{loads: make(chan string, 16)}
	var mu sync.Mutex
	var errs []error
	src := &source.ConfigMap{Client: cs, Namespace: snap.Namespace, Sink: sink, Log: logr.Discard(),
		OnError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch source: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("watch source errors as the sidecar's service account: %v", errs)
		}
	}()
	expectLoad(t, sink, snap.Data[snapshotKey])
	snap.Data[snapshotKey] = `{"schemaVersion":1,"version":"b"}`
	if err := e.Client.Update(context.Background(), snap); err != nil {
		t.Fatalf("update snapshot: %v", err)
	}
	expectLoad(t, sink, snap.Data[snapshotKey])
}

func expectLoad(t *testing.T, sink *recordingSink, want string) {
	t.Helper()
	select {
	case got := <-sink.loads:
		if got != want {
			t.Errorf("watch source loaded %q, want %q", got, want)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("watch source loaded nothing in 15s; want %q", want)
	}
}

// TestInstallSamplesServerSideApply applies config/sidecar, config/samples/example-app-sidecar,
// config/samples/example-app (before injection) and config/samples/envoy into a namespace that enforces and warns about the restricted Pod
// Security level: the API server accepts everything without a warning (so the pods are
// admitted, and the webhook has nothing to say about the policies), and every container of
// every Deployment is hardened, probed and sized.
func TestInstallSamplesServerSideApply(t *testing.T) {
	e := suite.Env(t)
	c, warnings := kube.NewWarningClient(t, e)
	ns := restrictedNamespace(t, e)
	for _, dir := range []string{sidecarDir, exampleAppDir, injectedDir, envoyDir} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			r, objs := renderDir(t, dir)
			for _, o := range objs {
				if o.GetNamespace() != "" {
					t.Errorf("%s %s sets namespace %q; samples go where `kubectl apply -k %s -n <ns>` puts them",
						o.GetKind(), o.GetName(), o.GetNamespace(), dir)
				}
			}
			if skipped := applyDryRun(t, c, warnings, ns, objs); len(skipped) > 0 {
				t.Errorf("skipped %v: samples should need only the operator's CRD", skipped)
			}
			for name := range r["Deployment"] {
				var dep appsv1.Deployment
				r.get(t, "Deployment", name, &dep)
				checkHardened(t, dir+": Deployment "+name, dep.Spec.Template.Spec)
			}
		})
	}
}

// TestInstallExampleAppWiring: Service :80 -> the sidecar's proxy :8000 -> the app's port on
// loopback; the sidecar reads the optional snapshot ConfigMap from its mount, knows its
// namespace, serves no gRPC, and is probed on its metrics address; the policy is 5 per 10s per
// X-API-Key on every path, shared when the header is missing.
func TestInstallExampleAppWiring(t *testing.T) {
	r, _ := renderDir(t, exampleAppDir)
	var dep appsv1.Deployment
	r.get(t, "Deployment", "echo", &dep)
	pod := dep.Spec.Template.Spec
	sc := containerNamed(t, pod, sidecarName)
	up := containerNamed(t, pod, "upstream")
	if len(pod.Containers) != 2 {
		t.Errorf("echo has %d containers, want the app and the sidecar", len(pod.Containers))
	}
	checkEchoService(t, r, &dep, sc)
	if len(up.Ports) != 1 || flagLast(sc.Args, "upstream") != "http://127.0.0.1:"+strconv.Itoa(int(up.Ports[0].ContainerPort)) {
		t.Errorf("--upstream %q does not reach the app's port %+v on loopback", flagLast(sc.Args, "upstream"), up.Ports)
	}
	if got := flagValues(sc.Args, "grpc-bind-address"); len(got) != 1 || got[0] != "" {
		t.Errorf("--grpc-bind-address %q: want the gRPC front off (empty)", got)
	}
	checkSnapshotMount(t, pod, sc)
	checkPodNamespaceEnv(t, sc)
	checkSidecarProbes(t, sc)

	var p policyv1alpha1.RateLimitPolicy
	r.get(t, "RateLimitPolicy", "echo-per-api-key", &p)
	s := p.Spec
	ids := s.Identity.Sources
	if len(s.Match.HTTP) != 1 || !slices.Equal(s.Match.HTTP[0].PathPrefixes, []string{"/"}) ||
		len(ids) != 1 || ids[0].Header == nil || ids[0].Header.Name != "X-API-Key" ||
		s.Identity.OnMissing != policyv1alpha1.MissingIdentityShared ||
		len(s.Limits) != 1 || s.Limits[0].Requests != 5 || s.Limits[0].Period.Duration != 10*time.Second {
		t.Errorf("policy spec %+v: want 5 per 10s per X-API-Key on /, Shared when missing", s)
	}
}

// checkEchoService: the Service sends port 80 to the echo pods' sidecar proxy.
func checkEchoService(t *testing.T, r rendered, dep *appsv1.Deployment, sc corev1.Container) {
	t.Helper()
	var svc corev1.Service
	r.get(t, "Service", "echo", &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Fatalf("Service echo %+v selector %v: want port 80 to the echo pods", svc.Spec.Ports, svc.Spec.Selector)
	}
	proxy := flagLast(sc.Args, "proxy-bind-address")
	if p, ok := resolvePort(sc, svc.Spec.Ports[0].TargetPort); !ok || p != addrPort(t, proxy) {
		t.Errorf("Service targetPort %v is not the sidecar's proxy address %q", svc.Spec.Ports[0].TargetPort, proxy)
	}
}

// checkSnapshotMount: --snapshot-file lies in a read-only mount of the ConfigMap
// ratelimit-snapshot, which is optional (the pod starts before the first policy).
func checkSnapshotMount(t *testing.T, pod corev1.PodSpec, sc corev1.Container) {
	t.Helper()
	file := flagLast(sc.Args, "snapshot-file")
	mount, vol := mountOf(pod, sc, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == snapshotName
	})
	switch {
	case vol == nil || mount == nil:
		t.Errorf("sidecar does not mount ConfigMap %s (volumes %+v)", snapshotName, pod.Volumes)
	case vol.ConfigMap.Optional == nil || !*vol.ConfigMap.Optional:
		t.Errorf("snapshot volume is not optional: pods would not start before the namespace's first policy")
	case !mount.ReadOnly || file != filepath.Join(mount.MountPath, snapshotKey):
		t.Errorf("--snapshot-file %q is not %s in the read-only mount %+v", file, snapshotKey, mount)
	}
}

// checkPodNamespaceEnv: the sidecar learns its namespace from the downward API.
func checkPodNamespaceEnv(t *testing.T, sc corev1.Container) {
	t.Helper()
	i := slices.IndexFunc(sc.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" })
	if i < 0 || sc.Env[i].ValueFrom == nil || sc.Env[i].ValueFrom.FieldRef == nil || sc.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("sidecar env %+v: want POD_NAMESPACE from metadata.namespace", sc.Env)
	}
}

// checkSidecarProbes: readiness is /readyz and liveness /healthz, on the metrics address.
func checkSidecarProbes(t *testing.T, sc corev1.Container) {
	t.Helper()
	port := addrPort(t, flagLast(sc.Args, "metrics-bind-address"))
	for path, p := range map[string]*corev1.Probe{"/readyz": sc.ReadinessProbe, "/healthz": sc.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromInt32(port) {
			t.Errorf("sidecar probe %+v: want GET %s on the metrics port %d", p, path, port)
		}
	}
}

// TestInstallEnvoyConfig parses the rendered envoy.yaml (not running Envoy) and checks the
// wiring: the ratelimit filter (domain edge) sits before the router and calls the cluster
// "ratelimit", which speaks HTTP/2 to the sidecar's gRPC address in the same pod; the route's
// actions produce the descriptor entries remote_address and api_key (from x-api-key); and the
// sample policy matches that domain and reads only entries Envoy sends.
func TestInstallEnvoyConfig(t *testing.T) {
	r, _ := renderDir(t, envoyDir)
	var dep appsv1.Deployment
	r.get(t, "Deployment", "edge", &dep)
	pod := dep.Spec.Template.Spec
	envoy := containerNamed(t, pod, "envoy")
	sc := containerNamed(t, pod, sidecarName)
	if pod.ServiceAccountName != sidecarName || len(r["Role"]) != 1 {
		t.Errorf("edge runs as %q with Roles %v; want %s from config/sidecar", pod.ServiceAccountName, r.names("Role"), sidecarName)
	}
	if !slices.Contains(sc.Args, "--snapshot-watch") {
		t.Errorf("sidecar args %v: want --snapshot-watch", sc.Args)
	}
	checkPodNamespaceEnv(t, sc)
	checkSidecarProbes(t, sc)

	cfg := envoyConfig(t, r, pod, envoy)
	hcm := checkEnvoyListener(t, cfg, envoy)
	domain := checkEnvoyFilters(t, hcm)
	keys := checkEnvoyRoute(t, hcm)
	checkEnvoyClusters(t, cfg, sc, containerNamed(t, pod, "upstream"))

	var p policyv1alpha1.RateLimitPolicy
	r.get(t, "RateLimitPolicy", "edge-per-api-key", &p)
	if p.Spec.Match.Envoy == nil || p.Spec.Match.Envoy.Domain != domain {
		t.Fatalf("policy match %+v: want envoy domain %q", p.Spec.Match, domain)
	}
	var idKeys []string
	for _, s := range p.Spec.Identity.Sources {
		if s.Descriptor != nil {
			idKeys = append(idKeys, s.Descriptor.Key)
		}
	}
	if !slices.Equal(idKeys, []string{"api_key", "remote_address"}) || len(idKeys) != len(p.Spec.Identity.Sources) {
		t.Errorf("policy identity %+v: want Descriptor api_key, then Descriptor remote_address", p.Spec.Identity.Sources)
	}
	for _, d := range p.Spec.Match.Envoy.Descriptors {
		idKeys = append(idKeys, d.Key)
	}
	for _, k := range idKeys {
		if !slices.Contains(keys, k) {
			t.Errorf("policy reads descriptor entry %q, which Envoy's actions never send (they send %v)", k, keys)
		}
	}
}

// envoyConfig follows the Envoy container's --config-path to its volume and the rendered
// (hash-named) ConfigMap, and parses the file.
func envoyConfig(t *testing.T, r rendered, pod corev1.PodSpec, envoy corev1.Container) *envoyBootstrap {
	t.Helper()
	file := flagLast(envoy.Args, "config-path")
	mount, vol := mountOf(pod, envoy, func(v corev1.Volume) bool { return v.ConfigMap != nil })
	if mount == nil || vol == nil || filepath.Dir(file) != mount.MountPath {
		t.Fatalf("envoy --config-path %q is not in a ConfigMap mount (%+v)", file, envoy.VolumeMounts)
	}
	var cm corev1.ConfigMap
	r.get(t, "ConfigMap", vol.ConfigMap.Name, &cm)
	text, ok := cm.Data[filepath.Base(file)]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s (keys %v)", cm.Name, filepath.Base(file), cm.Data)
	}
	var cfg envoyBootstrap
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatalf("envoy.yaml is not YAML: %v", err)
	}
	return &cfg
}

// checkEnvoyListener: one listener on the container's port with an HTTP connection manager.
func checkEnvoyListener(t *testing.T, cfg *envoyBootstrap, envoy corev1.Container) *envoyHCM {
	t.Helper()
	ls := cfg.StaticResources.Listeners
	if len(ls) != 1 || len(ls[0].FilterChains) != 1 || len(ls[0].FilterChains[0].Filters) != 1 {
		t.Fatalf("envoy listeners %+v: want one with one HTTP connection manager", ls)
	}
	if !hasPort(envoy, ls[0].Address.SocketAddress.PortValue) {
		t.Errorf("listener port %d is not a port of the envoy container %+v", ls[0].Address.SocketAddress.PortValue, envoy.Ports)
	}
	if a := cfg.Admin.Address.SocketAddress.Address; a != "127.0.0.1" {
		t.Errorf("envoy admin listens on %q: keep it on loopback", a)
	}
	f := ls[0].FilterChains[0].Filters[0]
	var hcm envoyHCM
	decodeTyped(t, f, "envoy.filters.network.http_connection_manager",
		"type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", &hcm)
	return &hcm
}

// checkEnvoyFilters: ratelimit (v3, V3 transport, cluster "ratelimit") before the router,
// which is last. It returns the domain.
func checkEnvoyFilters(t *testing.T, hcm *envoyHCM) string {
	t.Helper()
	names := make([]string, len(hcm.HTTPFilters))
	for i, f := range hcm.HTTPFilters {
		names[i] = f.Name
	}
	rl := slices.Index(names, "envoy.filters.http.ratelimit")
	if rl < 0 || len(names) == 0 || names[len(names)-1] != "envoy.filters.http.router" {
		t.Fatalf("http filters %v: want envoy.filters.http.ratelimit before envoy.filters.http.router (last)", names)
	}
	var cfg envoyRateLimit
	decodeTyped(t, hcm.HTTPFilters[rl], names[rl], "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit", &cfg)
	svc := cfg.RateLimitService
	if cfg.Domain != "edge" || svc.TransportAPIVersion != "V3" || svc.GRPCService.EnvoyGRPC.ClusterName != "ratelimit" {
		t.Errorf("ratelimit filter %+v: want domain edge, transport V3, envoy_grpc cluster ratelimit", cfg)
	}
	return cfg.Domain
}

// checkEnvoyRoute: the route's rate_limits send remote_address and x-api-key as api_key, and
// the header's absence does not drop the descriptor. It returns the entry keys sent.
func checkEnvoyRoute(t *testing.T, hcm *envoyHCM) []string {
	t.Helper()
	var keys []string
	var header bool
	for _, vh := range hcm.RouteConfig.VirtualHosts {
		for _, rt := range vh.Routes {
			for _, rl := range rt.Route.RateLimits {
				for _, a := range rl.Actions {
					switch {
					case a.RemoteAddress != nil:
						keys = append(keys, "remote_address")
					case a.RequestHeaders != nil:
						keys = append(keys, a.RequestHeaders.DescriptorKey)
						h := a.RequestHeaders
						header = header || (strings.EqualFold(h.HeaderName, "x-api-key") && h.DescriptorKey == "api_key" && h.SkipIfAbsent)
					}
				}
			}
		}
	}
	if !slices.Contains(keys, "remote_address") || !header {
		t.Errorf("route rate_limits send %v: want remote_address and request_headers x-api-key -> api_key (skip_if_absent)", keys)
	}
	return keys
}

// checkEnvoyClusters: "ratelimit" is HTTP/2 to the sidecar's --grpc-bind-address (loopback),
// and the route's cluster reaches the app container.
func checkEnvoyClusters(t *testing.T, cfg *envoyBootstrap, sc, app corev1.Container) {
	t.Helper()
	byName := map[string]envoyCluster{}
	for _, c := range cfg.StaticResources.Clusters {
		byName[c.Name] = c
	}
	rls, ok := byName["ratelimit"]
	if !ok {
		t.Fatalf("envoy clusters %v: no cluster ratelimit", slices.Collect(maps.Keys(byName)))
	}
	opts := rls.TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if opts.ExplicitHTTPConfig.HTTP2ProtocolOptions == nil {
		t.Errorf("cluster ratelimit does not speak HTTP/2 (gRPC needs it): %+v", rls.TypedExtensionProtocolOptions)
	}
	if got, want := rls.endpoints(), []string{flagLast(sc.Args, "grpc-bind-address")}; !slices.Equal(got, want) || !strings.HasPrefix(want[0], "127.0.0.1:") {
		t.Errorf("cluster ratelimit endpoints %v, want the sidecar's gRPC address %v on loopback", got, want)
	}
	appc, ok := byName["app"]
	if !ok || len(app.Args) == 0 || !slices.Equal(appc.endpoints(), []string{"127.0.0.1:" + strings.TrimPrefix(flagLast(app.Args, "port"), ":")}) {
		t.Errorf("cluster app %v does not reach the app container (args %v)", appc.endpoints(), app.Args)
	}
}

// decodeTyped checks a filter's name and typed_config @type and decodes the config.
func decodeTyped(t *testing.T, f envoyTyped, name, typ string, into any) {
	t.Helper()
	var head struct {
		Type string `json:"@type"`
	}
	if err := json.Unmarshal(f.TypedConfig, &head); err != nil || f.Name != name || head.Type != typ {
		t.Fatalf("filter %q with @type %q (err %v), want %q with %q", f.Name, head.Type, err, name, typ)
	}
	if err := json.Unmarshal(f.TypedConfig, into); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
}

// The parts of an Envoy v3 bootstrap the test reads.
type envoyAddress struct {
	SocketAddress struct {
		Address   string `json:"address"`
		PortValue int32  `json:"port_value"`
	} `json:"socket_address"`
}

type envoyTyped struct {
	Name        string          `json:"name"`
	TypedConfig json.RawMessage `json:"typed_config"`
}

type envoyBootstrap struct {
	Admin struct {
		Address envoyAddress `json:"address"`
	} `json:"admin"`
	StaticResources struct {
		Listeners []struct {
			Address      envoyAddress `json:"address"`
			FilterChains []struct {
				Filters []envoyTyped `json:"filters"`
			} `json:"filter_chains"`
		} `json:"listeners"`
		Clusters []envoyCluster `json:"clusters"`
	} `json:"static_resources"`
}

type envoyCluster struct {
	Name                          string `json:"name"`
	TypedExtensionProtocolOptions map[string]struct {
		ExplicitHTTPConfig struct {
			HTTP2ProtocolOptions *struct{} `json:"http2_protocol_options"`
		} `json:"explicit_http_config"`
	} `json:"typed_extension_protocol_options"`
	LoadAssignment struct {
		Endpoints []struct {
			LBEndpoints []struct {
				Endpoint struct {
					Address envoyAddress `json:"address"`
				} `json:"endpoint"`
			} `json:"lb_endpoints"`
		} `json:"endpoints"`
	} `json:"load_assignment"`
}

// endpoints lists the cluster's endpoints as host:port.
func (c envoyCluster) endpoints() []string {
	var out []string
	for _, e := range c.LoadAssignment.Endpoints {
		for _, lb := range e.LBEndpoints {
			a := lb.Endpoint.Address.SocketAddress
			out = append(out, fmt.Sprintf("%s:%d", a.Address, a.PortValue))
		}
	}
	return out
}

type envoyHCM struct {
	RouteConfig struct {
		VirtualHosts []struct {
			Routes []struct {
				Route struct {
					Cluster    string `json:"cluster"`
					RateLimits []struct {
						Actions []struct {
							RemoteAddress  *struct{} `json:"remote_address"`
							RequestHeaders *struct {
								HeaderName    string `json:"header_name"`
								DescriptorKey string `json:"descriptor_key"`
								SkipIfAbsent  bool   `json:"skip_if_absent"`
							} `json:"request_headers"`
						} `json:"actions"`
					} `json:"rate_limits"`
				} `json:"route"`
			} `json:"routes"`
		} `json:"virtual_hosts"`
	} `json:"route_config"`
	HTTPFilters []envoyTyped `json:"http_filters"`
}

type envoyRateLimit struct {
	Domain           string `json:"domain"`
	RateLimitService struct {
		TransportAPIVersion string `json:"transport_api_version"`
		GRPCService         struct {
			EnvoyGRPC struct {
				ClusterName string `json:"cluster_name"`
			} `json:"envoy_grpc"`
		} `json:"grpc_service"`
	} `json:"rate_limit_service"`
}

// checkHardened: every container runs as non-root on a read-only root file system, cannot
// escalate privileges, drops every capability, runs under a seccomp profile, has CPU and
// memory requests and limits, and liveness and readiness probes.
func checkHardened(t *testing.T, where string, pod corev1.PodSpec) {
	t.Helper()
	if len(pod.Containers) == 0 {
		t.Errorf("%s has no containers", where)
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		name := where + " container " + c.Name
		checkContainerSecurity(t, name, psc, c.SecurityContext)
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			if list.Cpu().IsZero() || list.Memory().IsZero() {
				t.Errorf("%s lacks CPU or memory requests/limits: %+v", name, c.Resources)
			}
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s lacks a liveness or readiness probe", name)
		}
	}
}

// checkContainerSecurity checks one container's security context, with the pod's as the
// fallback for what a container may inherit.
func checkContainerSecurity(t *testing.T, name string, psc *corev1.PodSecurityContext, sc *corev1.SecurityContext) {
	t.Helper()
	if sc == nil {
		t.Errorf("%s has no securityContext", name)
		return
	}
	if nonRoot, user := cmp.Or(sc.RunAsNonRoot, psc.RunAsNonRoot), cmp.Or(sc.RunAsUser, psc.RunAsUser); !isTrue(nonRoot) || (user != nil && *user == 0) {
		t.Errorf("%s may run as root (runAsNonRoot %v, runAsUser %v)", name, nonRoot, user)
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		t.Errorf("%s has a writable root file system", name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || isTrue(sc.Privileged) {
		t.Errorf("%s may escalate privileges", name)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s does not drop every capability: %+v", name, sc.Capabilities)
	}
	if sp := cmp.Or(sc.SeccompProfile, psc.SeccompProfile); sp == nil || sp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s has no RuntimeDefault seccomp profile: %+v", name, sp)
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// flagValues returns the values of every --name=value argument, in order (the last wins).
func flagValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// flagLast is the effective value of --name=value, or "".
func flagLast(args []string, name string) string {
	v := flagValues(args, name)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// addrPort is the port of a ":port" or "host:port" bind address.
func addrPort(t *testing.T, addr string) int32 {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	p, err := strconv.ParseInt(addr[i+1:], 10, 32)
	if i < 0 || err != nil {
		t.Fatalf("bind address %q has no port", addr)
	}
	return int32(p)
}

func containerNamed(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %q in %d containers", name, len(pod.Containers))
	}
	return pod.Containers[i]
}

// hasPort reports whether the container declares the port.
func hasPort(c corev1.Container, port int32) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port })
}

// resolvePort turns a Service targetPort (number or name) into the container's port number.
func resolvePort(c corev1.Container, target intstr.IntOrString) (int32, bool) {
	if target.Type == intstr.Int {
		return target.IntVal, hasPort(c, target.IntVal)
	}
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == target.StrVal })
	if i < 0 {
		return 0, false
	}
	return c.Ports[i].ContainerPort, true
}

// mountOf finds the container's mount of the first pod volume that match accepts.
func mountOf(pod corev1.PodSpec, c corev1.Container, match func(corev1.Volume) bool) (*corev1.VolumeMount, *corev1.Volume) {
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		if !match(*v) {
			continue
		}
		for j := range c.VolumeMounts {
			if c.VolumeMounts[j].Name == v.Name {
				return &c.VolumeMounts[j], v
			}
		}
		return nil, v
	}
	return nil, nil
}

// rulesEqual compares RBAC rules, ignoring order within each list.
func rulesEqual(got, want []rbacv1.PolicyRule) bool {
	norm := func(rules []rbacv1.PolicyRule) []string {
		out := make([]string, len(rules))
		for i, r := range rules {
			parts := [][]string{r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs, r.Verbs}
			var b strings.Builder
			for _, p := range parts {
				p = slices.Sorted(slices.Values(p))
				b.WriteString(strings.Join(p, ",") + "|")
			}
			out[i] = b.String()
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(norm(got), norm(want))
}
