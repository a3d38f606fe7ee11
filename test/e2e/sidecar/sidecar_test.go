package sidecar_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// policyWait bounds the wait for the sidecar to act on a published snapshot.
const policyWait = 15 * time.Second

// rig is a sidecar binary proxying to an upstream, with its addresses.
type rig struct {
	proc                  *proc.Process
	vol                   *volume
	redis                 *redistest.Server
	proxy, check, metrics string
}

func startRig(t *testing.T, withRedisFlag bool) *rig {
	t.Helper()
	r := &rig{redis: redistest.StartServer(t), vol: &volume{t: t, dir: t.TempDir()}}
	r.vol.publish(document(t, r.redis.Addr(), keyPolicy("orders", 3)))
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/api/slow" {
			time.Sleep(700 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "upstream "+req.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	addrs := wait.FreeAddrs(t, 4)
	r.proxy, r.check, r.metrics = addrs[0], addrs[1], addrs[2]
	args := []string{"--namespace", namespace, "--snapshot-file", r.vol.path(), "--upstream", upstream.URL,
		"--proxy-bind-address", r.proxy, "--http-bind-address", r.check, "--grpc-bind-address", addrs[3],
		"--metrics-bind-address", r.metrics, "--drain-delay", "0s", "--shutdown-grace", "5s", "--redis-timeout", "2s"}
	if withRedisFlag {
		args = append(args, "--redis-addrs", r.redis.Addr())
	}
	r.proc = startSidecar(t, proc.MustBuild(t, "cmd/sidecar"), args...)
	waitOK(t, r.proc, "http://"+r.metrics+"/readyz")
	return r
}

func (r *rig) get(t *testing.T, path, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.proxy+path, nil)
	must(t, err)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

func (r *rig) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.metrics + "/metrics") //nolint:noctx // test
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}

// TestSidecarBinary drives the real binary: burst then 429, a policy edit picked up from the
// mounted file, a corrupt snapshot refused with the last good one kept, the check API, metrics,
// and a SIGTERM that lets an in-flight request finish.
func TestSidecarBinary(t *testing.T) {
	r := startRig(t, true)
	for i := range 3 {
		if resp := r.get(t, "/api/x", "alice"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp := r.get(t, "/api/x", "alice")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "20" || resp.Header.Get("RateLimit") != `"orders/per-minute";r=0;t=20` {
		t.Fatalf("4th request: %d %v", resp.StatusCode, resp.Header)
	}

	r.vol.publish(document(t, r.redis.Addr(), keyPolicy("orders", 10)))
	wait.Until(t, policyWait, "the edited policy", func() bool {
		return r.get(t, "/api/x", "probe").Header.Get("RateLimit-Policy") == `"orders/per-minute";q=10;w=60`
	})
	r.vol.publish([]byte(`{"schemaVersion":1,"namespace":"shop","version":"0000","policies":[{"name":"x"`))
	wait.Until(t, policyWait, "the refusal counted", func() bool {
		return strings.Contains(r.metricsText(t), `ratelimit_sidecar_snapshot_loads_total{result="refused"} 1`)
	})
	if got := r.get(t, "/api/x", "bob").Header.Get("RateLimit-Policy"); got != `"orders/per-minute";q=10;w=60` {
		t.Fatalf("after a corrupt snapshot the last good one must stay: RateLimit-Policy %q", got)
	}

	check, err := http.Post("http://"+r.check+"/v1/check", "application/json", //nolint:noctx // test
		strings.NewReader(`{"policy":"orders","identity":"carol","cost":10}`))
	must(t, err)
	_ = check.Body.Close()
	if check.StatusCode != 200 || check.Header.Get("RateLimit") != `"orders/per-minute";r=0;t=60` {
		t.Fatalf("check API: %d %v", check.StatusCode, check.Header)
	}
	if m := r.metricsText(t); !strings.Contains(m, `ratelimit_sidecar_decisions_total{front="proxy",limit="per-minute",policy="orders",result="denied",source="Redis"} 1`) {
		t.Errorf("metrics lack the denial:\n%s", m)
	}

	drained := make(chan int, 1)
	go func() { drained <- r.get(t, "/api/slow", "dave").StatusCode }()
	time.Sleep(200 * time.Millisecond) // the request is at the upstream
	if err := r.proc.Stop(t, 30*time.Second); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if code := <-drained; code != 200 {
		t.Errorf("in-flight request during shutdown answered %d, want 200", code)
	}
}

// TestSidecarRedisFromSnapshot: without --redis-addrs the sidecar connects where the snapshot
// says and becomes ready.
func TestSidecarRedisFromSnapshot(t *testing.T) {
	r := startRig(t, false)
	if resp := r.get(t, "/api/x", "alice"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("first request: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestSidecarBeforeAnyPolicy: in a namespace without policies (no snapshot ConfigMap, so an
// empty volume) a sidecar without --redis-addrs is ready and passes every request; the first
// snapshot brings Redis and the limits.
func TestSidecarBeforeAnyPolicy(t *testing.T) {
	srv := redistest.StartServer(t)
	vol := &volume{t: t, dir: t.TempDir()}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	r := &rig{redis: srv, vol: vol, proxy: wait.FreeAddr(t), metrics: wait.FreeAddr(t)}
	r.proc = startSidecar(t, proc.MustBuild(t, "cmd/sidecar"), "--namespace", namespace, "--snapshot-file", vol.path(),
		"--upstream", upstream.URL, "--proxy-bind-address", r.proxy, "--http-bind-address", "",
		"--grpc-bind-address", "", "--metrics-bind-address", r.metrics, "--drain-delay", "0s", "--redis-timeout", "2s")
	waitOK(t, r.proc, "http://"+r.metrics+"/readyz")
	for range 5 {
		if resp := r.get(t, "/api/x", "alice"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("without policies: %d %v", resp.StatusCode, resp.Header)
		}
	}
	vol.publish(document(t, srv.Addr(), keyPolicy("orders", 2)))
	wait.Until(t, policyWait, "the first policy", func() bool { return r.get(t, "/api/x", "bob").Header.Get("RateLimit") != "" })
	if resp := r.get(t, "/api/x", "bob"); resp.StatusCode != 200 {
		t.Fatalf("bob's second: %d", resp.StatusCode)
	}
	if resp := r.get(t, "/api/x", "bob"); resp.StatusCode != 429 {
		t.Fatalf("bob's third must be denied: %d %v", resp.StatusCode, resp.Header)
	}
}
