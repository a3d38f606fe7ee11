package helm_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// TestLint: `helm lint --strict` passes with the default values and with every values file
// of the tests.
func TestLint(t *testing.T) {
	for _, files := range [][]string{nil, {mirrorValues}, {customValues}, {offValues}} {
		args := []string{"lint", "--strict", chartDir(), "--namespace", namespace}
		for _, f := range files {
			abs, _ := filepath.Abs(f)
			args = append(args, "--values", abs)
		}
		if out, err := runHelm(t, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// TestSchemaRefusesTypos: a misspelt or ill-typed value fails `helm template` through
// values.schema.json, naming the value, instead of being ignored.
func TestSchemaRefusesTypos(t *testing.T) {
	for set, want := range map[string]string{
		"redis.adress=x":                        "adress", //nolint:misspell // the misspelling is the point
		"webhook.certManager.enable=true":       "enable",
		"metrics.serviceMonitor.enabeld=true":   "enabeld",
		"sharedService.namespace={a}":           "namespace",
		"redis.mode=clustered":                  "mode",
		"leaderElection.leaseDuration=fifteen":  "leaseDuration",
		"webhook.port=70000":                    "port",
		"typo=1":                                "typo",
		"sidecarInjection.maxCPU=1":             "maxCPU",
		"sidecarInjection.pullPolicy=Sometimes": "pullPolicy",
	} {
		out, err := template(t, nil, set)
		if err == nil {
			t.Errorf("--set %s rendered:\n%.300s", set, out)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "schema") || !strings.Contains(msg, want) {
			t.Errorf("--set %s failed, but not through the schema naming %q: %v", set, want, err)
		}
	}
}

// TestTemplateDefaults: the default values render the manager with a self-signed webhook
// certificate whose CA is both configurations' caBundle and which is valid for the webhook
// Service's DNS names; nothing optional is rendered.
func TestTemplateDefaults(t *testing.T) {
	objs := render(t, nil)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "Certificate", "Issuer", "ConfigMap", "NetworkPolicy"} {
		if got := objs.ofKind(kind); len(got) > 0 {
			t.Errorf("default values render %v", got.names())
		}
	}
	dep := typed[appsv1.Deployment](t, objs.get(t, "Deployment", namespace, fullname))
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "ratelimit-operator:"+chartAppVersion(t) {
		t.Errorf("image %s: want the chart's appVersion as tag", img)
	}
	secret := typed[corev1.Secret](t, objs.get(t, "Secret", namespace, fullname+"-webhook-server-cert"))
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		u := objs.get(t, kind, "", fullname+"-"+strings.ToLower(strings.TrimSuffix(kind, "WebhookConfiguration")))
		if _, ok := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s asks cert-manager for its CA without cert-manager", kind)
		}
		webhooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, w := range webhooks {
			ca, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "caBundle")
			raw, err := base64.StdEncoding.DecodeString(ca)
			if err != nil || string(raw) != string(secret.Data["ca.crt"]) {
				t.Errorf("%s caBundle is not the Secret's ca.crt", kind)
			}
		}
	}
	verifyServing(t, secret, fullname+"-webhook."+namespace+".svc")
}

// verifyServing checks the Secret's tls.crt chains to its ca.crt for dnsName and matches
// tls.key.
func verifyServing(t *testing.T, s *corev1.Secret, dnsName string) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatalf("secret %s: ca.crt holds no certificate", s.Name)
	}
	block, _ := pem.Decode(s.Data["tls.crt"])
	if block == nil {
		t.Fatalf("secret %s: tls.crt holds no PEM", s.Name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify for %s: %v", dnsName, err)
	}
	if s.Type != corev1.SecretTypeTLS || len(s.Data["tls.key"]) == 0 {
		t.Errorf("secret %s: type %s, want kubernetes.io/tls with a key", s.Name, s.Type)
	}
}

// chartAppVersion reads appVersion from Chart.yaml, and checks version equals it.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `:\s*"?([^"\s]+)"?\s*$`).FindSubmatch(raw)
		if m == nil {
			t.Fatalf("Chart.yaml has no %s", name)
		}
		return string(m[1])
	}
	app := field("appVersion")
	if v := field("version"); v != app {
		t.Errorf("Chart.yaml version %s differs from appVersion %s: the chart is versioned with the operator", v, app)
	}
	return app
}

// TestTemplateCustom: with every optional part on, the chart renders the cert-manager
// Certificate (with the given issuer) and annotations, the ServiceMonitor, the PrometheusRule
// with files/alerts.yaml's groups, the dashboard ConfigMap, and config/sidecar and
// config/service in the listed namespaces (RBAC once per namespace).
func TestTemplateCustom(t *testing.T) {
	objs := render(t, []string{customValues})
	t.Run("certManager", func(t *testing.T) { checkCustomCert(t, objs) })
	t.Run("monitoring", func(t *testing.T) { checkCustomMonitoring(t, objs) })
	t.Run("namespaces", func(t *testing.T) { checkCustomNamespaces(t, objs) })
	args := managerArgs(t, objs)
	for _, want := range []string{
		"--redis-mode=sentinel",
		"--redis-addrs=sentinel-0.redis.svc:26379,sentinel-1.redis.svc:26379,sentinel-2.redis.svc:26379",
		"--redis-master-name=mymaster", "--redis-db=3", "--key-prefix=team:",
		"--redis-credentials-path=/var/run/secrets/ratelimit/redis", "--webhook-port=10443",
		"--metrics-bind-address=:9443", "--health-probe-bind-address=:8091",
		"--redis-memory-check-interval=1m", "--redis-memory-scan-keys-per-second=500",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
}

// checkCustomCert: cert-manager with an issuerRef renders a Certificate from that issuer,
// no Issuer and no Secret of its own, and the CA injection annotation on both webhooks.
func checkCustomCert(t *testing.T, objs objects) {
	if objs.find("Secret", namespace, fullname+"-webhook-server-cert") != nil || len(objs.ofKind("Issuer")) > 0 {
		t.Errorf("cert-manager with an issuerRef renders a self-signed Secret or an Issuer")
	}
	cert := objs.get(t, "Certificate", namespace, fullname+"-serving-cert")
	if kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind"); kind != "ClusterIssuer" {
		t.Errorf("certificate issuer kind %q, want the issuerRef's ClusterIssuer", kind)
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, u := range objs.ofKind(kind) {
			if got := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != namespace+"/"+fullname+"-serving-cert" {
				t.Errorf("%s inject-ca-from %q", kind, got)
			}
		}
	}
}

// checkCustomMonitoring: the ServiceMonitor, the PrometheusRule with files/alerts.yaml's
// groups and the dashboard ConfigMap, with their extra labels.
func checkCustomMonitoring(t *testing.T, objs objects) {
	sm := objs.get(t, "ServiceMonitor", namespace, fullname)
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack the extra label", sm.GetLabels())
	}
	rule := objs.get(t, "PrometheusRule", namespace, fullname)
	if groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups"); len(groups) == 0 {
		t.Errorf("PrometheusRule has no groups")
	}
	cm := objs.get(t, "ConfigMap", "monitoring", fullname+"-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetLabels()["team"] != "platform" {
		t.Errorf("dashboard labels %v: want grafana_dashboard=1 and the extra label", cm.GetLabels())
	}
	if data, _, _ := unstructured.NestedString(cm.Object, "data", "ratelimit-operator.json"); !strings.Contains(data, `"title"`) {
		t.Errorf("dashboard ConfigMap does not hold files/dashboard.json: %.200s", data)
	}
}

// checkCustomNamespaces: config/sidecar in every namespace of either list, once;
// config/service only in sharedService's namespaces.
func checkCustomNamespaces(t *testing.T, objs objects) {
	for _, ns := range []string{"team-a", "team-b", "gateways"} {
		for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
			objs.get(t, kind, ns, "ratelimit-sidecar")
		}
	}
	for _, ns := range []string{"team-b", "gateways"} {
		for _, kind := range []string{"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "NetworkPolicy"} {
			objs.get(t, kind, ns, "ratelimit-service")
		}
		if objs.find("HorizontalPodAutoscaler", ns, "ratelimit-service") != nil {
			t.Errorf("%s: autoscaling off still renders a HorizontalPodAutoscaler", ns)
		}
	}
	if objs.find("Deployment", "team-a", "ratelimit-service") != nil {
		t.Errorf("sidecarRBAC alone renders the shared service")
	}
	seen := map[string]int{}
	for _, u := range objs {
		seen[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%s rendered %d times", k, n)
		}
	}
}

// managerArgs are the manager container's arguments in the rendered Deployment.
func managerArgs(t *testing.T, objs objects) []string {
	t.Helper()
	dep := typed[appsv1.Deployment](t, objs.get(t, "Deployment", namespace, fullname))
	return dep.Spec.Template.Spec.Containers[0].Args
}

// TestEveryManagerFlagIsAValue: each flag cmd/manager defines is rendered by some values file,
// so no flag lacks a value. The flags come from the flag sets the manager binds: its own and
// its tenancy flags (read from cmd/manager's source), Redis's and zap's (bound here).
func TestEveryManagerFlagIsAValue(t *testing.T) {
	flags := managerFlags(t)
	rendered := map[string]bool{}
	for _, files := range [][]string{{customValues}, {offValues}} {
		for _, a := range managerArgs(t, render(t, files)) {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			rendered[name] = true
		}
	}
	for _, f := range flags {
		if !rendered[f] {
			t.Errorf("manager flag --%s is set by no value of the chart", f)
		}
	}
	for f := range rendered {
		if !slices.Contains(flags, f) {
			t.Errorf("chart renders --%s, which the manager does not define", f)
		}
	}
}

// managerFlags lists the manager's flags (but controller-runtime's --kubeconfig, which has
// no place in a pod).
func managerFlags(t *testing.T) []string {
	t.Helper()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	new(redisconn.Options).BindFlags(fs)
	new(zap.Options).BindFlags(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	// fs.XxxVar(&o.field, "name", ...) in cmd/manager.
	def := regexp.MustCompile(`fs\.\w+\(\s*&[\w.]+,\s*"([a-z0-9-]+)"`)
	files, err := filepath.Glob(filepath.Join(kube.RepoRoot(), "cmd", "manager", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	own := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllSubmatch(src, -1) {
			names = append(names, string(m[1]))
			own++
		}
	}
	if own < 15 {
		t.Fatalf("found only %d of the manager's own flags in cmd/manager: has the way it defines them changed?", own)
	}
	return names
}

// TestTemplateOff: with the webhooks off the chart renders no webhook configuration, Service
// or certificate and no certificate volume, and passes --webhooks=false; with the APIService
// off, none (and no --usage-front-proxy); the Redis memory
// checks off pass their 0s, and RedisBackends off --redis-backends=false.
func TestTemplateOff(t *testing.T) {
	objs := render(t, []string{offValues})
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Secret", "Certificate", "ServiceAccount", "APIService"} {
		if got := objs.ofKind(kind); len(got) > 0 {
			t.Errorf("off values render %v", got.names())
		}
	}
	dep := typed[appsv1.Deployment](t, objs.get(t, "Deployment", namespace, fullname))
	if dep.Spec.Template.Spec.ServiceAccountName != "existing-manager" {
		t.Errorf("service account %q, want existing-manager", dep.Spec.Template.Spec.ServiceAccountName)
	}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "webhook-certs" {
			t.Errorf("webhooks off still mount a certificate")
		}
	}
	if args := managerArgs(t, objs); slices.Contains(args, "--usage-front-proxy") {
		t.Errorf("APIService off, yet --usage-front-proxy: %q", args)
	}
	// 0 is a value here (off), not "left out".
	for _, want := range []string{"--redis-memory-check-interval=0", "--redis-memory-scan-keys-per-second=0", "--redis-backends=false"} {
		if args := managerArgs(t, objs); !slices.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
}
