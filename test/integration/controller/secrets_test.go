package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestSecretNeverLeaks: the Redis password reaches Redis and nothing else. The manager binary
// runs at its most verbose log level against a redis-server that requires a password, first
// with a wrong one from --redis-credentials-path (so the AUTH error paths log, set statuses
// and emit Warning events), then with the right one (policies go Ready). Neither password,
// nor its base64, nor the base64 of user:password, appears in any ConfigMap, policy or Event
// of the namespace (whole objects), in the manager's complete stdout and stderr, or in its
// /metrics output.
func TestSecretNeverLeaks(t *testing.T) {
	e := isolatedEnv(t)
	password, wrong := "pw-"+randomHex(t), "wrong-"+randomHex(t)
	rds := redistest.StartServer(t, redistest.WithPassword(password))
	kubeconfig := writeKubeconfig(t, e.Config, "")
	ns := kube.NewNamespace(t, e, "secret-")
	names := []string{"login", "orders", "search"}

	// Phase 1: wrong password.
	bad := redistest.CredentialsDir(t, "default", wrong)
	metrics1 := wait.FreeAddr(t)
	m1 := startBinManager(t, kubeconfig, verboseArgs(rds.Addr(), bad, metrics1)...)
	for i, name := range names {
		create(t, e, newPolicy(ns, name, int64(10+i)))
	}
	for _, name := range names {
		waitCondition(t, e, ns, name, v1alpha1.ConditionScriptsLoaded, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable)
	}
	waitSnapshot(t, e, ns, names...) // published while Redis refuses: the snapshot is written too
	scrape1 := scrapeMetrics(t, m1, metrics1)
	m1.term(t)

	// Phase 2: the right password.
	good := redistest.CredentialsDir(t, "default", password)
	metrics2 := wait.FreeAddr(t)
	m2 := startBinManager(t, kubeconfig, verboseArgs(rds.Addr(), good, metrics2)...)
	for _, name := range names {
		waitReady(t, e, ns, name)
	}
	waitScriptsLoaded(t, e, ns, names...)
	if err := scriptsLoaded(ctxFor(t), rds.Client()); err != nil {
		t.Fatalf("scripts not loaded with the right password: %v", err)
	}
	scrape2 := scrapeMetrics(t, m2, metrics2)
	m2.term(t) // its log is complete once it has exited

	// The error paths did run: the AUTH failure is in the log and in a Warning event.
	if !strings.Contains(m1.output(), "WRONGPASS") {
		t.Errorf("the wrong-password run logged no AUTH failure (WRONGPASS); the log check proves little")
	}
	if w := warningEvents(t, e, ns); len(w) == 0 {
		t.Error("no Warning event from the wrong-password run")
	}

	places := map[string]string{
		"log of the wrong-password run": m1.output(),
		"log of the right-password run": m2.output(),
		"metrics (wrong password)":      scrape1,
		"metrics (right password)":      scrape2,
	}
	for name, text := range objectsOf(t, e, ns) {
		places[name] = text
	}
	for what, needle := range secretForms(map[string]string{"password": password, "wrong password": wrong}) {
		for where, text := range places {
			if strings.Contains(text, needle) {
				t.Errorf("the %s appears in %s", what, where)
			}
		}
	}
	t.Logf("searched %d places (%d bytes of manager log) for 3 forms of each password",
		len(places), len(m1.output())+len(m2.output()))
}

// verboseArgs runs the manager at its most verbose log level with plain-HTTP metrics on
// loopback, reaching Redis with the credentials in dir.
func verboseArgs(redisAddr, dir, metricsAddr string) []string {
	return []string{"--redis-addrs", redisAddr, "--redis-credentials-path", dir,
		"--zap-log-level", "10", "--script-resync", "500ms",
		"--metrics-secure=false", "--metrics-bind-address", metricsAddr}
}

func randomHex(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// secretForms is every form of each secret worth looking for: itself, its base64 (a Secret's
// data), and the base64 of default:secret (an HTTP basic-auth header).
func secretForms(secrets map[string]string) map[string]string {
	out := map[string]string{}
	for what, s := range secrets {
		out[what] = s
		out[what+" in base64"] = base64.StdEncoding.EncodeToString([]byte(s))
		out[what+" in base64 user:password"] = base64.StdEncoding.EncodeToString([]byte("default:" + s))
	}
	return out
}

// scrapeMetrics reads the manager's plain-HTTP /metrics and checks it is the operator's.
func scrapeMetrics(t testing.TB, m *binManager, addr string) string {
	t.Helper()
	wait.HTTPStatus(t, nil, "http://"+addr+"/metrics", http.StatusOK, 60*time.Second, m.gone)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read metrics: %v", err)
	}
	if !strings.Contains(string(body), "ratelimit_script_load") {
		t.Fatalf("metrics lack the operator's own series:\n%s", lastLines(string(body), 20))
	}
	return string(body)
}

// objectsOf serialises every ConfigMap, RateLimitPolicy and Event (both event APIs) of the
// namespace, whole, by place name.
func objectsOf(t testing.TB, e *kube.Env, ns string) map[string]string {
	t.Helper()
	lists := map[string]client.ObjectList{
		"ConfigMaps":             &corev1.ConfigMapList{},
		"RateLimitPolicies":      &v1alpha1.RateLimitPolicyList{},
		"Events (events.k8s.io)": &eventsv1.EventList{},
		"Events (core/v1)":       &corev1.EventList{},
	}
	out := map[string]string{}
	for name, list := range lists {
		if err := e.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatalf("list %s: %v", name, err)
		}
		b, err := json.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		if meta.LenList(list) == 0 {
			t.Errorf("no %s in %s: searching them proves nothing", name, ns)
		}
		out[name] = string(b)
	}
	return out
}
