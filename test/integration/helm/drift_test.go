package helm_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/manifests"
)

// kustomize renders a kustomization under config/ into objects.
func kustomize(t *testing.T, dir string) objects {
	t.Helper()
	var objs objects
	for _, d := range manifests.Kustomize(t, dir) {
		objs = append(objs, d.Object)
	}
	return objs
}

// config/default's namespace and name prefix.
const (
	kNamespace = "ratelimit-system"
	kPrefix    = "ratelimit-"
)

// field is the value at path in u (nil when absent).
func field(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

// sameField fails the test when the value at path differs between the chart's object and
// kustomize's.
func sameField(t *testing.T, what string, chart, kust *unstructured.Unstructured, path ...string) {
	t.Helper()
	same(t, what+" "+strings.Join(path, "."), field(chart, path...), field(kust, path...))
}

// same fails the test when chart and kustomize values differ, showing both as YAML.
func same(t *testing.T, what string, chart, kust any) {
	t.Helper()
	if !reflect.DeepEqual(chart, kust) {
		c, _ := yaml.Marshal(chart)
		k, _ := yaml.Marshal(kust)
		t.Errorf("%s: the chart renders\n%s\nconfig/ has\n%s", what, c, k)
	}
}

// TestNoDriftFromKustomize: rendered with values mirroring config/default, the chart installs
// the same CRD, RBAC rules, manager container, webhooks, Services and certificate as
// `kubectl kustomize config/default`, the same ServiceMonitor and PrometheusRule as
// config/prometheus, and config/sidecar's and config/service's objects in a listed namespace. Names (Helm's prefix), labels and annotations Helm adds are not
// compared; what the objects do is.
func TestNoDriftFromKustomize(t *testing.T) {
	chart := render(t, []string{mirrorValues}, "sharedService.namespaces={apps}", "metrics.serviceMonitor.enabled=true",
		"metrics.prometheusRule.enabled=true")
	kust := kustomize(t, "config/default")

	t.Run("crd", func(t *testing.T) {
		crds := kust.ofKind("CustomResourceDefinition")
		if got := chart.ofKind("CustomResourceDefinition"); len(got) != len(crds) {
			t.Fatalf("chart has CRDs %v, config/default %v", got.names(), crds.names())
		}
		for _, k := range crds {
			sameField(t, "CRD "+k.GetName(), chart.get(t, "CustomResourceDefinition", "", k.GetName()), k, "spec")
		}
	})

	t.Run("rbac", func(t *testing.T) {
		for chartName, kustName := range map[string]string{
			"manager":                  "manager-role",
			"metrics-auth":             "metrics-auth-role",
			"metrics-reader":           "metrics-reader",
			"ratelimitpolicy-editor":   "ratelimitpolicy-editor-role",
			"ratelimitpolicy-viewer":   "ratelimitpolicy-viewer-role",
			"ratelimitoverride-editor": "ratelimitoverride-editor-role",
			"ratelimitoverride-viewer": "ratelimitoverride-viewer-role",
		} {
			c := chart.get(t, "ClusterRole", "", fullname+"-"+chartName)
			k := kust.get(t, "ClusterRole", "", kPrefix+kustName)
			sameField(t, "ClusterRole "+chartName, c, k, "rules")
			for _, l := range []string{"rbac.authorization.k8s.io/aggregate-to-view"} {
				same(t, "ClusterRole "+chartName+" label "+l, c.GetLabels()[l], k.GetLabels()[l])
			}
		}
		sameField(t, "leader election Role", chart.get(t, "Role", namespace, fullname+"-leader-election"),
			kust.get(t, "Role", kNamespace, kPrefix+"leader-election-role"), "rules")
		// The manager's namespaced Role (RedisBackends' Secrets), bound to its ServiceAccount.
		sameField(t, "manager Role", chart.get(t, "Role", namespace, fullname+"-manager"),
			kust.get(t, "Role", kNamespace, kPrefix+"manager-role"), "rules")
		c := chart.get(t, "RoleBinding", namespace, fullname+"-manager")
		k := kust.get(t, "RoleBinding", kNamespace, kPrefix+"manager-namespace-rolebinding")
		same(t, "manager RoleBinding role", field(c, "roleRef", "name"), fullname+"-manager")
		same(t, "manager RoleBinding role (config/)", field(k, "roleRef", "name"), kPrefix+"manager-role")
		same(t, "manager RoleBinding subjects", field(c, "subjects"),
			[]any{map[string]any{"kind": "ServiceAccount", "name": fullname, "namespace": namespace}})
		same(t, "manager RoleBinding subjects (config/)", field(k, "subjects"),
			[]any{map[string]any{"kind": "ServiceAccount", "name": kPrefix + "controller-manager", "namespace": kNamespace}})
		// Every binding gives the manager's ServiceAccount the same roles.
		sa := fullname
		for chartName, kustRole := range map[string]string{"manager": "manager-role", "metrics-auth": "metrics-auth-role"} {
			c := chart.get(t, "ClusterRoleBinding", "", fullname+"-"+chartName)
			same(t, "ClusterRoleBinding "+chartName+" role", field(c, "roleRef", "name"), fullname+"-"+chartName)
			same(t, "ClusterRoleBinding "+chartName+" subjects", field(c, "subjects"),
				[]any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": namespace}})
			kust.get(t, "ClusterRoleBinding", "", strings.TrimSuffix(kPrefix+kustRole, "-role")+"-rolebinding")
		}
		chart.get(t, "ServiceAccount", namespace, sa)
	})

	t.Run("manager", func(t *testing.T) {
		c := chart.get(t, "Deployment", namespace, fullname)
		k := kust.get(t, "Deployment", kNamespace, kPrefix+"controller-manager")
		for _, p := range [][]string{{"spec", "replicas"}, {"spec", "template", "spec", "securityContext"},
			{"spec", "template", "spec", "terminationGracePeriodSeconds"}} {
			sameField(t, "manager Deployment", c, k, p...)
		}
		cc, kc := container(t, c), container(t, k)
		for _, f := range []string{"name", "image", "command", "ports", "livenessProbe", "readinessProbe", "securityContext", "resources"} {
			same(t, "manager container "+f, cc[f], kc[f])
		}
		same(t, "manager args (sorted)", sortedStrings(cc["args"]), sortedStrings(kc["args"]))
		same(t, "manager volume mount paths", mountPaths(cc), mountPaths(kc))
		same(t, "pod annotations", field(c, "spec", "template", "metadata", "annotations"), field(k, "spec", "template", "metadata", "annotations"))
	})

	t.Run("webhooks", func(t *testing.T) {
		for kind, short := range map[string]string{"MutatingWebhookConfiguration": "mutating", "ValidatingWebhookConfiguration": "validating"} {
			c := chart.get(t, kind, "", fullname+"-"+short)
			k := kust.get(t, kind, "", kPrefix+short+"-webhook-configuration")
			cw, kw := webhooks(t, c, fullname+"-webhook", namespace), webhooks(t, k, kPrefix+"webhook-service", kNamespace)
			same(t, kind+" webhooks (but the Service's name and namespace)", cw, kw)
			same(t, kind+" inject-ca-from", c.GetAnnotations()["cert-manager.io/inject-ca-from"], namespace+"/"+fullname+"-serving-cert")
		}
		sameField(t, "webhook Service", chart.get(t, "Service", namespace, fullname+"-webhook"),
			kust.get(t, "Service", kNamespace, kPrefix+"webhook-service"), "spec", "ports")
		cert := chart.get(t, "Certificate", namespace, fullname+"-serving-cert")
		same(t, "Certificate dnsNames", field(cert, "spec", "dnsNames"), []any{
			fullname + "-webhook." + namespace + ".svc", fullname + "-webhook." + namespace + ".svc.cluster.local"})
		same(t, "Certificate secret", field(cert, "spec", "secretName"), secretVolume(t, chart.get(t, "Deployment", namespace, fullname), "webhook-certs"))
		issuer := chart.get(t, "Issuer", namespace, field(cert, "spec", "issuerRef", "name").(string))
		sameField(t, "Issuer", issuer, kust.get(t, "Issuer", kNamespace, kPrefix+"selfsigned-issuer"), "spec")
	})

	t.Run("metrics", func(t *testing.T) {
		c := chart.get(t, "Service", namespace, fullname+"-metrics")
		k := kust.get(t, "Service", kNamespace, kPrefix+"controller-manager-metrics-service")
		sameField(t, "metrics Service", c, k, "spec", "ports")
		podLabels := field(chart.get(t, "Deployment", namespace, fullname), "spec", "template", "metadata", "labels").(map[string]any)
		selects(t, "metrics Service", field(c, "spec", "selector"), podLabels)
		sm := chart.get(t, "ServiceMonitor", namespace, fullname)
		prom := kustomize(t, "config/prometheus")
		sameField(t, "ServiceMonitor", sm, prom.get(t, "ServiceMonitor", "system", "controller-manager-metrics-monitor"), "spec", "endpoints")
		selects(t, "ServiceMonitor", field(sm, "spec", "selector", "matchLabels"), anyMap(c.GetLabels()))
		rules := prom.ofKind("PrometheusRule")
		if len(rules) != 1 {
			t.Fatalf("config/prometheus has PrometheusRules %v, want one", rules.names())
		}
		sameField(t, "PrometheusRule", chart.get(t, "PrometheusRule", namespace, fullname), rules[0], "spec")
	})

	t.Run("sidecar", func(t *testing.T) {
		side := kustomize(t, "config/sidecar")
		sameField(t, "sidecar Role", chart.get(t, "Role", "apps", "ratelimit-sidecar"), side.get(t, "Role", "", "ratelimit-sidecar"), "rules")
		sameField(t, "sidecar RoleBinding", chart.get(t, "RoleBinding", "apps", "ratelimit-sidecar"), side.get(t, "RoleBinding", "", "ratelimit-sidecar"), "roleRef")
		chart.get(t, "ServiceAccount", "apps", "ratelimit-sidecar")
	})

	t.Run("sharedService", func(t *testing.T) {
		svc := kustomize(t, "config/service")
		c := chart.get(t, "Deployment", "apps", "ratelimit-service")
		k := svc.get(t, "Deployment", "", "ratelimit-service")
		for _, p := range [][]string{{"spec", "selector"}, {"spec", "strategy"}, {"spec", "template", "metadata", "labels"},
			{"spec", "template", "spec", "securityContext"}, {"spec", "template", "spec", "topologySpreadConstraints"},
			{"spec", "template", "spec", "serviceAccountName"}, {"spec", "template", "spec", "terminationGracePeriodSeconds"},
			{"spec", "template", "spec", "volumes"}} {
			sameField(t, "shared service Deployment", c, k, p...)
		}
		cc, kc := container(t, c), container(t, k)
		for _, f := range []string{"name", "image", "command", "args", "ports", "livenessProbe", "readinessProbe", "securityContext", "resources", "volumeMounts"} {
			want := kc[f]
			if f == "image" {
				want = "ratelimit-operator:dev"
			}
			same(t, "shared service container "+f, cc[f], want)
		}
		// The ConfigMap kustomize generates has a hash suffix; the chart's has none.
		same(t, "shared service env", envWithoutHash(cc), envWithoutHash(kc))
		kcm := svc.ofKind("ConfigMap")
		if len(kcm) != 1 {
			t.Fatalf("config/service has ConfigMaps %v", kcm.names())
		}
		sameField(t, "shared service ConfigMap", chart.get(t, "ConfigMap", "apps", "ratelimit-service"), kcm[0], "data")
		for _, kind := range []string{"Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "NetworkPolicy"} {
			sameField(t, "shared service "+kind, chart.get(t, kind, "apps", "ratelimit-service"), svc.get(t, kind, "", "ratelimit-service"), "spec")
		}
	})
}

// container is the first container of a Deployment.
func container(t *testing.T, dep *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _ := field(dep, "spec", "template", "spec", "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("%s has %d containers, want 1", dep.GetName(), len(cs))
	}
	return cs[0].(map[string]any)
}

func sortedStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	slices.Sort(out)
	return out
}

func mountPaths(c map[string]any) []string {
	var out []string
	for _, m := range c["volumeMounts"].([]any) {
		out = append(out, m.(map[string]any)["mountPath"].(string))
	}
	slices.Sort(out)
	return out
}

// secretVolume is the Secret behind the Deployment's volume of that name.
func secretVolume(t *testing.T, dep *unstructured.Unstructured, name string) any {
	t.Helper()
	vols, _ := field(dep, "spec", "template", "spec", "volumes").([]any)
	for _, v := range vols {
		m := v.(map[string]any)
		if m["name"] == name {
			s, _, _ := unstructured.NestedString(m, "secret", "secretName")
			return s
		}
	}
	t.Fatalf("%s has no volume %s", dep.GetName(), name)
	return nil
}

// webhooks are a configuration's webhooks with the Service reference checked against
// svc/ns and then dropped, and any caBundle dropped: what remains must not differ.
func webhooks(t *testing.T, u *unstructured.Unstructured, svc, ns string) []any {
	t.Helper()
	ws, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	for _, w := range ws {
		m := w.(map[string]any)
		if got, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name"); got != svc {
			t.Errorf("%s: webhook calls Service %s, want %s", u.GetName(), got, svc)
		}
		if got, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace"); got != ns {
			t.Errorf("%s: webhook calls a Service in %s, want %s", u.GetName(), got, ns)
		}
		unstructured.RemoveNestedField(m, "clientConfig", "service", "name")
		unstructured.RemoveNestedField(m, "clientConfig", "service", "namespace")
		unstructured.RemoveNestedField(m, "clientConfig", "caBundle")
	}
	return ws
}

// selects fails the test unless every label of selector is among labels.
func selects(t *testing.T, what string, selector any, labels map[string]any) {
	t.Helper()
	sel, _ := selector.(map[string]any)
	if len(sel) == 0 {
		t.Errorf("%s has an empty selector", what)
	}
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("%s selector %s=%v does not match %v", what, k, v, labels)
		}
	}
}

func anyMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// envWithoutHash is a container's env with configMapKeyRef names cut at the kustomize hash.
func envWithoutHash(c map[string]any) []any {
	env, _ := c["env"].([]any)
	out := make([]any, 0, len(env))
	for _, e := range env {
		e := deepCopy(e.(map[string]any))
		if name, ok, _ := unstructured.NestedString(e, "valueFrom", "configMapKeyRef", "name"); ok && strings.HasPrefix(name, "ratelimit-service-") {
			_ = unstructured.SetNestedField(e, "ratelimit-service", "valueFrom", "configMapKeyRef", "name")
		}
		out = append(out, e)
	}
	return out
}

func deepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
