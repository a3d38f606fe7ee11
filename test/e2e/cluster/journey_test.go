package cluster_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/cluster"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	system  = "ratelimit-system"
	release = "ratelimit-operator"
	// The example app in two namespaces: its sidecars read the snapshot from a mounted
	// ConfigMap (as shipped) or watch it through the API server (config/sidecar).
	fileNS  = "e2e-demo"
	watchNS = "e2e-watch"
	samples = "e2e-shop"
	gateway = "e2e-gateway"
)

// journey is the state the steps hand on.
type journey struct {
	c         *cluster.Cluster
	s         *svcClient
	helmStart time.Time
	run       string // a per-run suffix for identities, so no two runs share a counter
	seq       int
	quotaUser string // the caller the calendar quota step spent (2 of 2), for the usage step
}

// TestJourney is what a user does, in order: install, apply policies, wire an app, send
// traffic, edit a policy, use the shared service, live through faults, upgrade, uninstall.
// A step that fails ends the journey.
func TestJourney(t *testing.T) {
	c := need(t)
	j := &journey{c: c, s: newSvcClient(t, c), run: fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)}
	steps := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"helm install: manager Available", j.install},
		{"metrics: a scraper's token is authorized through the Service", j.metrics},
		{"samples applied: Ready; a bad policy refused by the webhook", j.samples},
		{"example app: 200 × limit, then 429 with RateLimit headers", j.exampleApp},
		{"injected example app: one label and annotation, 200 × limit, then 429", j.injectedApp},
		{"policy edit reaches running sidecars", j.policyEdit},
		{"manager down: an opted-in pod waits for it, other pods are created", j.managerDown},
		{"calendar quota: Retry-After to the next local midnight", j.calendarQuota},
		{"usage: support reads the quota's caller with kubectl ratelimit and grants it 1, under RBAC", j.usage},
		{"shared service answers forward auth for a gateway pod", j.sharedService},
		{"Redis pod deleted: failure modes, then Redis", j.redisFaults},
		{"leader manager pod deleted: the other replica takes over", j.leaderHandover},
		{"rollout restart: no request answered wrongly", j.rolloutRestart},
		{"helm upgrade to a new image tag", j.upgrade},
		{"after the upgrade: kubectl ratelimit sidecars shows the pods to roll", j.sidecarsAfterUpgrade},
		{"tenant mode: the namespace's own Redis user", j.tenancy},
		{"helm uninstall: CRD and policies remain", j.uninstall},
	}
	if !c.Local || os.Getenv("CLUSTER_REUSE") == "1" {
		j.clean(t)
	}
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			dump(t, c, system, fileNS, watchNS, injectNS, samples, gateway)
			return
		}
	}
}

// image splits an image reference into repository and tag.
func image(ref string) (repo, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, "latest"
	}
	return ref[:i], ref[i+1:]
}

// adminPassword is the Redis password of the manager's administrative user (tenant mode).
const adminPassword = "e2e-admin-password"

// redisYAML is Redis as a pod of the restricted standard, with the administrative user of
// config/redis/acl.conf (for tenant mode) beside the default user.
func redisYAML(t *testing.T, img string) string {
	t.Helper()
	acl, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "config", "redis", "acl.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var admin string
	for _, l := range strings.Split(string(acl), "\n") {
		if strings.HasPrefix(l, "user ratelimit-admin ") {
			sum := sha256.Sum256([]byte(adminPassword))
			admin = strings.Replace(l, "#REPLACE-WITH-SHA256-HEX-OF-THE-ADMIN-PASSWORD", "#"+hex.EncodeToString(sum[:]), 1)
		}
	}
	if admin == "" {
		t.Fatal("config/redis/acl.conf has no ratelimit-admin user")
	}
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: redis-config
data:
  redis.conf: |
    port 6379
    bind * -::*
    protected-mode no
    save ""
    appendonly no
    dir /data
    %s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: redis
  labels: {app.kubernetes.io/name: redis}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: redis}
  template:
    metadata:
      labels: {app.kubernetes.io/name: redis}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 5
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: redis
        image: %s
        imagePullPolicy: IfNotPresent
        command: [redis-server, /etc/redis/redis.conf]
        ports: [{name: redis, containerPort: 6379}]
        readinessProbe:
          tcpSocket: {port: 6379}
          periodSeconds: 1
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: config, mountPath: /etc/redis}
      volumes:
      - {name: data, emptyDir: {}}
      - {name: config, configMap: {name: redis-config}}
---
apiVersion: v1
kind: Service
metadata:
  name: redis
spec:
  selector: {app.kubernetes.io/name: redis}
  ports: [{name: redis, port: 6379, targetPort: redis}]
`, admin, img)
}

// install runs Redis and `helm install`s the chart as the README says (self-signed webhook
// certificate), with two manager replicas.
func (j *journey) install(t *testing.T) {
	c := j.c
	namespace(t, c, system)
	apply(t, c, system, redisYAML(t, c.Images.Redis))
	kc(t, c, "-n", system, "rollout", "status", "deploy/redis", "--timeout=120s")
	repo, tag := image(c.Images.Operator)
	j.helmStart = time.Now()
	ctx := wait.Context(t, 6*time.Minute)
	if _, err := c.Helm(ctx, "install", release, "charts/ratelimit-operator", "--namespace", system,
		"--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "replicaCount=2",
		"--set", "sidecarInjection.enabled=true",
		"--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	kc(t, c, "-n", system, "wait", "--for=condition=Available", "deploy/"+release, "--timeout=60s")
	measure("helm install → manager Available", time.Since(j.helmStart))
	// Probes pass: every manager pod is Ready and none restarted (liveness never failed).
	out := kc(t, c, "-n", system, "get", "pods", "-l", "app.kubernetes.io/instance="+release,
		"-o", `jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].ready} {.status.containerStatuses[0].restartCount}{"\n"}{end}`)
	lines := strings.Fields(strings.TrimSpace(out))
	if len(lines) != 6 {
		t.Fatalf("want 2 manager pods, got:\n%s", out)
	}
	for i := 0; i < len(lines); i += 3 {
		if lines[i+1] != "true" || lines[i+2] != "0" {
			t.Errorf("manager pod %s: ready=%s restarts=%s", lines[i], lines[i+1], lines[i+2])
		}
	}
}

// samples applies config/samples with kubectl and waits for every policy to be Ready; then a
// policy the webhook must refuse is refused, through the webhook's Service.
func (j *journey) samples(t *testing.T) {
	c := j.c
	namespace(t, c, samples)
	t0 := time.Now()
	kc(t, c, "apply", "-k", "config/samples", "-n", samples)
	kc(t, c, "-n", samples, "wait", "--for=condition=Ready", "rlp", "--all", "--timeout=120s")
	measure("kubectl apply -k config/samples → all Ready", time.Since(t0))
	measure("helm install → all sample policies Ready", time.Since(j.helmStart))
	n := strings.Fields(kc(t, c, "-n", samples, "get", "rlp", "-o", "name"))
	if len(n) != 6 {
		t.Errorf("want the 6 sample policies, got %v", n)
	}
	// The mutating webhook filled in the key layout the samples leave out.
	for _, p := range n {
		if kc(t, c, "-n", samples, "get", p, "-o", "jsonpath={.spec.keyLayout.state}") == "" {
			t.Errorf("%s has no key layout: the defaulting webhook did not run", p)
		}
	}
	j.refused(t)
}

// badPolicy passes every CEL rule of the CRD; only the validating webhook knows a TTL
// must cover the algorithm's horizon.
const badPolicy = `apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: ttl-too-short
spec:
  match: {http: [{pathPrefixes: [/short]}]}
  identity: {sources: [{type: Header, header: {name: X-API-Key}}]}
  algorithm: FixedWindow
  limits: [{name: per-minute, requests: 10, period: 1m}]
  keyLayout:
    state: "{rl:${namespace}/short:${identity}}:${limit}"
    ttl: 10s
`

// refused applies badPolicy and expects the validating webhook's refusal.
func (j *journey) refused(t *testing.T) {
	t.Helper()
	_, err := j.c.Kubectl(wait.Context(t, time.Minute), []byte(badPolicy), "apply", "-n", samples, "-f", "-")
	if err == nil {
		t.Fatal("the bad policy was admitted")
	}
	if !strings.Contains(err.Error(), "shorter than the FixedWindow horizon") {
		t.Fatalf("the bad policy was refused, but not by the webhook: %v", err)
	}
}

// overlay writes a kustomization that deploys dir (under the repository) into ns with the
// suite's images, plus extra lines, and returns its directory.
func (j *journey) overlay(t *testing.T, ns string, dirs []string, extra string) string {
	t.Helper()
	d := t.TempDir()
	repo, tag := image(j.c.Images.Operator)
	agRepo, agTag := image(j.c.Images.Agnhost)
	var res strings.Builder
	for _, dir := range dirs {
		// kustomize takes no absolute root: the path from the overlay.
		rel, err := filepath.Rel(d, filepath.Join(kube.RepoRoot(), dir))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&res, "- %s\n", rel)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
%simages:
- name: ratelimit-operator
  newName: %q
  newTag: %q
- name: registry.k8s.io/e2e-test-images/agnhost
  newName: %q
  newTag: %q
%s`, ns, res.String(), repo, tag, agRepo, agTag, extra)
	if err := os.WriteFile(filepath.Join(d, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

// watchPatch turns the example app's sidecar from the mounted file to the API watch, as
// the README's table says: --snapshot-watch, config/sidecar, serviceAccountName.
const watchPatch = `patches:
- target: {kind: Deployment, name: echo}
  patch: |
    - op: replace
      path: /spec/template/spec/containers/1/args/0
      value: --snapshot-watch
    - op: add
      path: /spec/template/spec/serviceAccountName
      value: ratelimit-sidecar
    - op: replace
      path: /spec/template/spec/automountServiceAccountToken
      value: true
`

// burst sends n requests as one new API key and returns the statuses, failing the test on
// a transport error; the last reply is returned for its headers.
func (j *journey) burst(ctx context.Context, ns, key string, n int) ([]int, []reply, error) {
	var codes []int
	var replies []reply
	for range n {
		r, err := j.s.get(ctx, ns, "echo", "/", map[string]string{"X-API-Key": key})
		if err != nil {
			return codes, replies, err
		}
		codes = append(codes, r.status)
		replies = append(replies, r)
	}
	return codes, replies, nil
}

// enforced reports whether a burst of limit+2 as a new key gives 200 × limit, then 429.
func (j *journey) enforced(ctx context.Context, ns string, limit int, key string) (bool, []reply, error) {
	codes, replies, err := j.burst(ctx, ns, key, limit+2)
	if err != nil {
		return false, nil, err
	}
	for i, code := range codes {
		want := 200
		if i >= limit {
			want = 429
		}
		if code != want {
			return false, replies, nil
		}
	}
	return true, replies, nil
}

// waitEnforced polls until the limit holds in ns, returning how long that took.
func (j *journey) waitEnforced(t *testing.T, ns string, limit int, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	i := 0
	var last []reply
	err := wait.Poll(timeout, 500*time.Millisecond, func() error {
		i++
		ok, replies, err := j.enforced(t.Context(), ns, limit, fmt.Sprintf("%s-%s-%d-%d", ns, j.run, limit, i))
		if err != nil {
			return err
		}
		last = replies
		if !ok {
			return fmt.Errorf("not enforced yet")
		}
		return nil
	})
	if err != nil {
		var codes []int
		for _, r := range last {
			codes = append(codes, r.status)
		}
		t.Fatalf("limit %d in %s not enforced after %v: %v (last burst %v)", limit, ns, timeout, err, codes)
	}
	return time.Since(t0)
}

// exampleApp deploys config/samples/example-app-sidecar twice, as shipped (snapshot from the mounted
// ConfigMap) and watching the snapshot through the API server, and sends traffic through
// each app's Service.
func (j *journey) exampleApp(t *testing.T) {
	c := j.c
	namespace(t, c, fileNS)
	namespace(t, c, watchNS)
	t0 := time.Now()
	kc(t, c, "apply", "-k", j.overlay(t, fileNS, []string{"config/samples/example-app-sidecar"}, ""))
	kc(t, c, "apply", "-k", j.overlay(t, watchNS, []string{"config/samples/example-app-sidecar", "config/sidecar"}, watchPatch))
	for _, ns := range []string{fileNS, watchNS} {
		kc(t, c, "-n", ns, "rollout", "status", "deploy/echo", "--timeout=180s")
		kc(t, c, "-n", ns, "wait", "--for=condition=Ready", "rlp/echo-per-api-key", "--timeout=60s")
	}
	measure("example app applied → Available", time.Since(t0))
	for _, ns := range []string{watchNS, fileNS} {
		d := j.waitEnforced(t, ns, 5, 3*time.Minute)
		measure(fmt.Sprintf("example app applied → limit enforced (%s)", mode(ns)), time.Since(t0))
		t.Logf("%s: enforced %v after the app was Available", ns, d)
		ok, replies, err := j.enforced(t.Context(), ns, 5, "headers-"+j.run+ns)
		if err != nil || !ok {
			t.Fatalf("%s: burst not 200×5 then 429: %v", ns, err)
		}
		for i, r := range replies {
			if r.header.Get("RateLimit") == "" || r.header.Get("RateLimit-Policy") == "" {
				t.Errorf("%s: reply %d (%d) lacks RateLimit headers: %v", ns, i, r.status, r.header)
			}
			if r.status == 429 && r.header.Get("Retry-After") == "" {
				t.Errorf("%s: 429 without Retry-After: %v", ns, r.header)
			}
		}
	}
}

func mode(ns string) string {
	switch ns {
	case watchNS:
		return "API watch"
	case injectNS:
		return "injected, mounted ConfigMap"
	}
	return "mounted ConfigMap"
}

// policyEdit lowers the example policy's limit from 5 to 3 and measures how long until each
// namespace's running sidecars enforce it.
func (j *journey) policyEdit(t *testing.T) {
	c := j.c
	patch := `[{"op":"replace","path":"/spec/limits/0/requests","value":3}]`
	t0 := time.Now()
	for _, ns := range []string{watchNS, fileNS, injectNS} {
		kc(t, c, "-n", ns, "patch", "rlp", "echo-per-api-key", "--type=json", "-p", patch)
	}
	for _, ns := range []string{watchNS, fileNS, injectNS} {
		j.waitEnforced(t, ns, 3, 3*time.Minute)
		measure(fmt.Sprintf("policy edit applied → enforced in the pods (%s)", mode(ns)), time.Since(t0))
	}
}

// gatewayYAML is a Caddy gateway (config/gateways/caddy/Caddyfile as shipped) asking the
// namespace's shared service (config/service) through forward auth, in front of an app, and
// a policy for the gateway's host.
func gatewayYAML(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	caddyfile, err := os.ReadFile(filepath.Join(kube.RepoRoot(), "config", "gateways", "caddy", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	indented := "    " + strings.ReplaceAll(strings.TrimRight(string(caddyfile), "\n"), "\n", "\n    ")
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: caddy
data:
  Caddyfile: |
%s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: caddy
  labels: {app.kubernetes.io/name: caddy}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: caddy}
  template:
    metadata:
      labels: {app.kubernetes.io/name: caddy}
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: caddy
        image: %s
        imagePullPolicy: IfNotPresent
        command: [caddy, run, --adapter, caddyfile, --config, /etc/caddy/Caddyfile]
        env:
        - {name: SERVED_HOSTS, value: shop.example.com}
        - {name: SIDECAR_ADDR, value: "ratelimit-service:8082"}
        - {name: UPSTREAM_ADDR, value: "upstream:80"}
        - {name: XDG_CONFIG_HOME, value: /tmp}
        - {name: XDG_DATA_HOME, value: /tmp}
        - {name: HOME, value: /tmp}
        ports: [{name: http, containerPort: 8000}]
        readinessProbe:
          tcpSocket: {port: 8000}
          periodSeconds: 2
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: config, mountPath: /etc/caddy}
        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: config, configMap: {name: caddy}}
      - {name: tmp, emptyDir: {}}
---
apiVersion: v1
kind: Service
metadata:
  name: caddy
spec:
  selector: {app.kubernetes.io/name: caddy}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: shop-per-key
spec:
  match:
    http:
    - hosts: [shop.example.com]
  identity:
    sources:
    - type: Header
      header: {name: X-API-Key}
  algorithm: FixedWindow
  limits:
  - {name: per-10s, requests: 3, period: 10s}
`, indented, c.Images.Caddy) + "---\n" + helloApp("upstream", c.Images.Agnhost)
}

// sharedService runs config/service in a namespace and a Caddy gateway pod in front of an
// app asking it through forward auth: 200 × 3 then 429 through the gateway's Service.
func (j *journey) sharedService(t *testing.T) {
	c := j.c
	namespace(t, c, gateway)
	cidrs := envOr("E2E_GATEWAY_CIDRS", "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16")
	kc(t, c, "apply", "-k", j.overlay(t, gateway, []string{"config/service"}, fmt.Sprintf(`configMapGenerator:
- name: ratelimit-service
  behavior: merge
  literals:
  - forward-auth-trusted-cidrs=%s
`, cidrs)))
	apply(t, c, gateway, gatewayYAML(t, c))
	for _, d := range []string{"ratelimit-service", "caddy", "upstream"} {
		kc(t, c, "-n", gateway, "rollout", "status", "deploy/"+d, "--timeout=180s")
	}
	kc(t, c, "-n", gateway, "wait", "--for=condition=Ready", "rlp/shop-per-key", "--timeout=60s")
	i := 0
	var codes []int
	err := wait.Poll(2*time.Minute, 500*time.Millisecond, func() error {
		i++
		codes = nil
		key := fmt.Sprintf("gw-%s-%d", j.run, i)
		for range 5 {
			r, err := j.s.get(t.Context(), gateway, "caddy", "/", map[string]string{"Host": "shop.example.com", "X-API-Key": key})
			if err != nil {
				return err
			}
			codes = append(codes, r.status)
		}
		if fmt.Sprint(codes) != "[200 200 200 429 429]" {
			return fmt.Errorf("through the gateway: %v", codes)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the gateway does not enforce the shared service's answers: %v", err)
	}
	// A host the gateway does not serve never reaches the app.
	r, err := j.s.get(t.Context(), gateway, "caddy", "/", map[string]string{"Host": "other.example.com"})
	if err != nil || r.status != 421 {
		t.Errorf("another host: %v %d, want 421", err, r.status)
	}
}

// faultPolicies are one policy per failure mode on their own paths, counted per X-User
// (the example policy, which matches every path, counts X-API-Key, which each request
// sends afresh).
var faultPolicies = faultPolicy("fault-closed", "/closed", "per-minute", 1000, "1m", "FailClosed") + "---\n" +
	faultPolicy("fault-open", "/open", "per-hour", 1, "1h", "FailOpen") + "---\n" +
	faultPolicy("fault-cap", "/cap", "per-minute", 1000, "1m", "LocalCap") + "  localCap: {requests: 2, period: 1m}\n"

// faultPolicy is one of faultPolicies: FixedWindow on path with one limit, failing as mode.
func faultPolicy(name, path, limit string, requests int, period, mode string) string {
	return fmt.Sprintf(`apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: %s
spec:
  match: {http: [{pathPrefixes: [%s]}]}
  identity: {sources: [{type: Header, header: {name: X-User}}]}
  algorithm: FixedWindow
  limits: [{name: %s, requests: %d, period: %s}]
  failureMode: %s
`, name, path, limit, requests, period, mode)
}

// call sends GET path to the watching example app as user (and a fresh API key).
func (j *journey) call(ctx context.Context, path, user string) (int, error) {
	j.seq++
	r, err := j.s.get(ctx, watchNS, "echo", path, map[string]string{"X-User": user, "X-API-Key": fmt.Sprintf("k-%s-%d", j.run, j.seq)})
	return r.status, err
}

// redisFaults deletes the Redis pod twice: once as a Deployment replaces it (timed: first
// answer by the failure mode, first by Redis again), once scaled to zero so each failure
// mode can be asked while Redis is away.
func (j *journey) redisFaults(t *testing.T) {
	c := j.c
	apply(t, c, watchNS, faultPolicies)
	kc(t, c, "-n", watchNS, "wait", "--for=condition=Ready", "rlp/fault-closed", "rlp/fault-open", "rlp/fault-cap", "--timeout=60s")
	wait.Eventually(t, time.Minute, "the fault policies enforced", func() error {
		return j.twice(t.Context(), "/open", fmt.Sprintf("open-%s-%d", j.run, time.Now().UnixNano()), 429)
	})
	j.redisReplaced(t)
	j.redisAway(t)
}

// twice calls path twice as user and wants the second answer to be second.
func (j *journey) twice(ctx context.Context, path, user string, second int) error {
	a, err := j.call(ctx, path, user)
	if err != nil {
		return err
	}
	b, err := j.call(ctx, path, user)
	if err != nil {
		return err
	}
	if a != 200 || b != second {
		return fmt.Errorf("%s twice as %s: %d %d, want 200 %d", path, user, a, b, second)
	}
	return nil
}

// redisReplaced deletes the Redis pod and times, on a FailClosed path, the first answer by
// the failure mode and the first by Redis again while the Deployment replaces it.
func (j *journey) redisReplaced(t *testing.T) {
	t0 := time.Now()
	kc(t, j.c, "-n", system, "delete", "pod", "-l", "app.kubernetes.io/name=redis", "--wait=false")
	var firstFM, firstRedis time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for n := 0; time.Now().Before(deadline) && firstRedis == 0; n++ {
		code, err := j.call(t.Context(), "/closed", fmt.Sprintf("closed-%s-%d", j.run, n))
		if err != nil {
			t.Fatalf("/closed while Redis is replaced: %v", err)
		}
		switch {
		case code == 429 && firstFM == 0:
			firstFM = time.Since(t0)
		case code == 200 && firstFM != 0:
			firstRedis = time.Since(t0)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if firstFM == 0 || firstRedis == 0 {
		t.Fatalf("Redis pod deleted: first failure-mode answer after %v, first Redis answer after %v", firstFM, firstRedis)
	}
	measure("Redis pod deleted → first answer by the failure mode", firstFM)
	measure("Redis pod deleted → first answer by Redis again", firstRedis)
}

// redisAway scales Redis to zero, so that each failure mode can be asked while it is away,
// then back: Redis decides again.
func (j *journey) redisAway(t *testing.T) {
	c := j.c
	kc(t, c, "-n", system, "scale", "deploy/redis", "--replicas=0")
	// Redis is away once its pod is gone (a terminating redis-server still answers the
	// connections it has) and both sidecar replicas say so: FailClosed refuses a new caller
	// each time, which Redis (1 per hour) would admit, several times in a row.
	if out, err := c.Kubectl(t.Context(), nil, "-n", system, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=redis",
		"--timeout=120s"); err != nil && !strings.Contains(out+err.Error(), "no matching resources") {
		t.Fatalf("Redis pod still there: %v\n%s", err, out)
	}
	n := 0
	wait.Eventually(t, time.Minute, "FailClosed to refuse on every replica", func() error {
		n++
		code, err := j.call(t.Context(), "/closed", fmt.Sprintf("closed-down-%s-%d", j.run, n))
		if err != nil || code != 429 {
			return fmt.Errorf("/closed: %d: %w", code, err)
		}
		for i := range 5 {
			if code, err = j.call(t.Context(), "/closed", fmt.Sprintf("closed-down-%s-%d-%d", j.run, n, i)); err != nil || code != 429 {
				return fmt.Errorf("/closed, %d in a row: %d: %w", i+1, code, err)
			}
		}
		return nil
	})
	// FailOpen admits: twice as one user, whom Redis (1 per hour) would refuse the second
	// time. (A user Redis exhausted before is still refused: a sidecar answers a deny that
	// is certain until a known time from its deny cache, Redis or not.)
	if err := j.twice(t.Context(), "/open", "open-down-"+j.run, 200); err != nil {
		t.Errorf("FailOpen with Redis away: %v", err)
	}
	// LocalCap: each of the two sidecar replicas admits up to its own cap (2 per minute):
	// of 5 requests as one user the first is admitted, and at most 4.
	var capCodes []int
	admitted := 0
	for range 5 {
		code, err := j.call(t.Context(), "/cap", "cap-"+j.run)
		if err != nil {
			t.Fatal(err)
		}
		capCodes = append(capCodes, code)
		if code == 200 {
			admitted++
		}
	}
	if capCodes[0] != 200 || admitted > 4 {
		t.Errorf("LocalCap with Redis away: %v, want the first admitted and at most 4 of 5", capCodes)
	}
	kc(t, c, "-n", system, "scale", "deploy/redis", "--replicas=1")
	kc(t, c, "-n", system, "rollout", "status", "deploy/redis", "--timeout=120s")
	wait.Eventually(t, 2*time.Minute, "Redis to decide again", func() error {
		return j.twice(t.Context(), "/open", fmt.Sprintf("back-%s-%d", j.run, time.Now().UnixNano()), 429)
	})
}

// leaderHandover deletes the manager pod holding the leader lease: the other replica takes
// over, every policy keeps its status, and a new policy becomes Ready.
func (j *journey) leaderHandover(t *testing.T) {
	c := j.c
	lease := "ratelimit-operator.policy.ratelimit.dev"
	holder := strings.TrimSpace(kc(t, c, "-n", system, "get", "lease", lease, "-o", "jsonpath={.spec.holderIdentity}"))
	pod, _, _ := strings.Cut(holder, "_")
	if pod == "" {
		t.Fatalf("no leader: holder %q", holder)
	}
	before := kc(t, c, "-n", samples, "get", "rlp", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}/{.status.observedGeneration} {end}`)
	t0 := time.Now()
	kc(t, c, "-n", system, "delete", "pod", pod, "--wait=false")
	var newHolder string
	wait.Eventually(t, 2*time.Minute, "another replica to take the lease", func() error {
		h := strings.TrimSpace(kc(t, c, "-n", system, "get", "lease", lease, "-o", "jsonpath={.spec.holderIdentity}"))
		p, _, _ := strings.Cut(h, "_")
		if p == "" || p == pod {
			return fmt.Errorf("holder %q", h)
		}
		newHolder = p
		return nil
	})
	measure("leader manager pod deleted → other replica leads", time.Since(t0))
	t.Logf("leader %s → %s in %v", pod, newHolder, time.Since(t0))
	apply(t, c, samples, `apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: after-handover
spec:
  match: {http: [{pathPrefixes: [/after]}]}
  identity: {sources: [{type: Header, header: {name: X-User}}]}
  algorithm: GCRA
  limits: [{name: per-second, requests: 5, period: 1s}]
`)
	t1 := time.Now()
	kc(t, c, "-n", samples, "wait", "--for=condition=Ready", "rlp/after-handover", "--timeout=90s")
	measure("new leader: policy applied → Ready", time.Since(t1))
	after := kc(t, c, "-n", samples, "get", "rlp", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}/{.status.observedGeneration} {end}`)
	for _, p := range strings.Fields(before) {
		if !strings.Contains(after, p) {
			t.Errorf("policy status %s lost across the handover: now %s", p, after)
		}
	}
	kc(t, c, "-n", system, "rollout", "status", "deploy/"+release, "--timeout=120s")
}

// rolloutRestart restarts the example app while requests flow, each as a new caller well
// within its limit: every answer must be 200.
func (j *journey) rolloutRestart(t *testing.T) {
	c := j.c
	stop := make(chan struct{})
	type result struct {
		code int
		err  error
	}
	results := make(chan result, 10000)
	go func() {
		defer close(results)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := j.s.get(ctx, watchNS, "echo", "/", map[string]string{"X-API-Key": fmt.Sprintf("roll-%s-%d", j.run, n)})
			cancel()
			results <- result{r.status, err}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t0 := time.Now()
	kc(t, c, "-n", watchNS, "rollout", "restart", "deploy/echo")
	kc(t, c, "-n", watchNS, "rollout", "status", "deploy/echo", "--timeout=180s")
	time.Sleep(3 * time.Second)
	close(stop)
	measure("rollout restart of the example app", time.Since(t0))
	total, wrong := 0, map[string]int{}
	for r := range results {
		total++
		switch {
		case r.err != nil:
			wrong[r.err.Error()]++
		case r.code != 200:
			wrong[fmt.Sprint(r.code)]++
		}
	}
	if len(wrong) > 0 {
		t.Errorf("of %d requests during the rollout, answered wrongly: %v", total, wrong)
	}
	t.Logf("%d requests during the rollout", total)
}

// webhookCA is the CA bundle the API server trusts for the validating webhook.
func (j *journey) webhookCA(t *testing.T) string {
	return kc(t, j.c, "get", "validatingwebhookconfigurations", "-l", "app.kubernetes.io/instance="+release,
		"-o", "jsonpath={.items[*].webhooks[*].clientConfig.caBundle}")
}

// upgrade moves the release to a new image tag: the managers roll, the webhook certificate
// stays, policies stay Ready and enforced, and the webhook still refuses a bad policy.
func (j *journey) upgrade(t *testing.T) {
	c := j.c
	ca := j.webhookCA(t)
	if ca == "" {
		t.Fatal("no caBundle in the webhook configuration")
	}
	repo, tag := image(c.Images.Upgrade)
	t0 := time.Now()
	if _, err := c.Helm(wait.Context(t, 6*time.Minute), "upgrade", release, "charts/ratelimit-operator", "-n", system,
		"--reuse-values", "--set", "image.repository="+repo, "--set", "image.tag="+tag, "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	kc(t, c, "-n", system, "rollout", "status", "deploy/"+release, "--timeout=120s")
	measure("helm upgrade (new image tag) → rolled out", time.Since(t0))
	img := kc(t, c, "-n", system, "get", "deploy", release, "-o", "jsonpath={.spec.template.spec.containers[0].image}")
	if img != c.Images.Upgrade {
		t.Errorf("manager image after the upgrade: %s, want %s", img, c.Images.Upgrade)
	}
	if got := j.webhookCA(t); got != ca {
		t.Error("the webhook's CA bundle changed across the upgrade")
	}
	kc(t, c, "-n", samples, "wait", "--for=condition=Ready", "rlp", "--all", "--timeout=60s")
	j.waitEnforced(t, watchNS, 3, time.Minute)
	j.refused(t)
}

// tenancy turns on per-namespace Redis users with a helm upgrade (the manager as the
// administrative user of config/redis/acl.conf): the watching namespace gets its own
// Secret, its sidecars use it, and Redis itself scopes that user to the namespace's keys.
func (j *journey) tenancy(t *testing.T) {
	c := j.c
	kc(t, c, "-n", system, "create", "secret", "generic", "ratelimit-redis-credentials", "--type=kubernetes.io/basic-auth",
		"--from-literal=username=ratelimit-admin", "--from-literal=password="+adminPassword)
	if _, err := c.Helm(wait.Context(t, 6*time.Minute), "upgrade", release, "charts/ratelimit-operator", "-n", system,
		"--reuse-values", "--set", "redis.credentials.enabled=true", "--set", "redis.tenantUsers.enabled=true",
		"--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	var user string
	wait.Eventually(t, 2*time.Minute, "the namespace's Redis credentials", func() error {
		out, err := c.Kubectl(t.Context(), nil, "-n", watchNS, "get", "secret", "ratelimit-redis-credentials",
			"-o", `jsonpath={.metadata.labels.policy\.ratelimit\.dev/tenant-credentials} {.data.username}`)
		if err != nil {
			return err
		}
		label, u, _ := strings.Cut(strings.TrimSpace(out), " ")
		if label != "true" || u == "" {
			return fmt.Errorf("secret: %q", out)
		}
		user = u
		return nil
	})
	// The sidecars mount that Secret already (optional); the README says: uncomment the flag.
	kc(t, c, "-n", watchNS, "patch", "deploy", "echo", "--type=json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/1/args/-","value":"--redis-credentials-path=/var/run/secrets/ratelimit/redis"}]`)
	kc(t, c, "-n", watchNS, "rollout", "status", "deploy/echo", "--timeout=180s")
	j.waitEnforced(t, watchNS, 3, 2*time.Minute)
	name := decode(t, user)
	clients := kc(t, c, "-n", system, "exec", "deploy/redis", "--", "redis-cli", "client", "list")
	if !strings.Contains(clients, "user="+name+" ") {
		t.Errorf("no Redis client authenticated as %s:\n%s", name, clients)
	}
	pw := decode(t, kc(t, c, "-n", watchNS, "get", "secret", "ratelimit-redis-credentials", "-o", "jsonpath={.data.password}"))
	out, _ := c.Kubectl(t.Context(), nil, "-n", system, "exec", "deploy/redis", "--", "redis-cli", "--user", name, "--pass", pw,
		"--no-auth-warning", "getrange", "{rl:"+fileNS+"/echo-per-api-key:x}:per-10s", "0", "31")
	if !strings.Contains(out, "NOPERM") {
		t.Errorf("%s read another namespace's key: %q", name, out)
	}
}

// uninstall removes the release: the CRD and every policy stay.
func (j *journey) uninstall(t *testing.T) {
	c := j.c
	if _, err := c.Helm(wait.Context(t, 3*time.Minute), "uninstall", release, "-n", system, "--wait"); err != nil {
		t.Fatal(err)
	}
	kc(t, c, "get", "crd", "ratelimitpolicies.policy.ratelimit.dev")
	n := strings.Fields(kc(t, c, "-n", samples, "get", "rlp", "-o", "name"))
	if len(n) != 7 {
		t.Errorf("policies after helm uninstall: %v, want the 6 samples and after-handover", n)
	}
	// Without the manager nobody removes the finalizers: the README's command lets a
	// namespace with policies go.
	kc(t, c, "delete", "namespace", samples, "--wait=false")
	j.dropFinalizers(t.Context(), samples)
	kc(t, c, "wait", "--for=delete", "namespace/"+samples, "--timeout=120s")
}

// decode is a Secret's base64 value.
func decode(t *testing.T, v string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// clean removes what an earlier run left on a cluster that outlives the suite. That run
// ended with `helm uninstall`, so no manager removes the policies' finalizers: the README's
// command does.
func (j *journey) clean(t *testing.T) {
	ctx := wait.Context(t, 5*time.Minute)
	namespaces := []string{fileNS, watchNS, injectNS, samples, gateway}
	_, _ = j.c.Kubectl(ctx, nil, append([]string{"delete", "namespace", "--ignore-not-found", "--wait=false"}, namespaces...)...)
	for _, ns := range namespaces {
		j.dropFinalizers(ctx, ns)
	}
	_, _ = j.c.Helm(ctx, "uninstall", release, "-n", system, "--wait")
	_, _ = j.c.Kubectl(ctx, nil, append([]string{"delete", "namespace", "--ignore-not-found", "--wait", "--timeout=4m", system}, namespaces...)...)
}

// dropFinalizers is the README's command for policies without a manager:
// kubectl get rlp -o name | xargs kubectl patch --type=merge -p '{"metadata":{"finalizers":null}}'.
func (j *journey) dropFinalizers(ctx context.Context, ns string) {
	out, _ := j.c.Kubectl(ctx, nil, "-n", ns, "get", "rlp", "-o", "name")
	for _, p := range strings.Fields(out) {
		_, _ = j.c.Kubectl(ctx, nil, "-n", ns, "patch", p, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	}
}

// metrics scrapes the manager's metrics Service (HTTPS, authenticated and authorized by the
// API server) as a Prometheus would: a service account bound to the metrics-reader
// ClusterRole gets 200, one without the binding 403, no token 401.
func (j *journey) metrics(t *testing.T) {
	c := j.c
	if !c.Local {
		missing.Part(t, "the scrape goes to the ClusterIP directly, which only this machine's cluster routes from the test")
	}
	kc(t, c, "-n", system, "create", "serviceaccount", "e2e-scraper")
	kc(t, c, "-n", system, "create", "serviceaccount", "e2e-stranger")
	kc(t, c, "create", "clusterrolebinding", "e2e-scraper", "--clusterrole="+release+"-metrics-reader",
		"--serviceaccount="+system+":e2e-scraper")
	base, err := j.s.url(t.Context(), system, release+"-metrics", 8443)
	if err != nil {
		t.Fatal(err)
	}
	url := "https" + strings.TrimPrefix(base, "http") + "/metrics"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The manager serves metrics with a self-signed certificate; the README's
		// ServiceMonitor skips verification the same way. The bearer token authenticates.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
	}}
	scrape := func(sa string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if sa != "" {
			token := strings.TrimSpace(kc(t, c, "-n", system, "create", "token", sa))
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	wait.Eventually(t, time.Minute, "the scraper to read the metrics", func() error {
		code, body := scrape("e2e-scraper")
		if code != 200 || !strings.Contains(body, "rest_client_requests_total") {
			return fmt.Errorf("scrape: %d %.200s", code, body)
		}
		return nil
	})
	if code, _ := scrape("e2e-stranger"); code != 403 {
		t.Errorf("a token without the binding: %d, want 403", code)
	}
	if code, _ := scrape(""); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
}
