package sidecar_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// slotTTL is the concurrency policy's slot ttl: how long a killed sidecar's slots stay held.
const slotTTL = 2 * time.Second

// slowUpstream counts the requests in flight at once and holds each until hold returns.
type slowUpstream struct {
	now, peak, served atomic.Int64
	hold              func()
}

func (u *slowUpstream) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n := u.now.Add(1)
	for m := u.peak.Load(); n > m && !u.peak.CompareAndSwap(m, n); m = u.peak.Load() {
	}
	u.hold()
	u.now.Add(-1)
	u.served.Add(1)
	_, _ = io.WriteString(w, "done")
}

// concurrencyRig is two sidecar binaries proxying to one slow upstream, sharing one Redis
// and a policy of 3 requests in flight per X-API-Key on /api.
type concurrencyRig struct {
	up       *slowUpstream
	sidecars []*proc.Process
	proxies  []string
}

func startConcurrencyRig(t *testing.T, hold func()) *concurrencyRig {
	t.Helper()
	srv := redistest.StartServer(t)
	vol := &volume{t: t, dir: t.TempDir()}
	p := keyPolicy("llm", 100000)
	p.Spec.Concurrency = &v1alpha1.Concurrency{Max: 3, SlotTTL: &metav1.Duration{Duration: slotTTL}}
	vol.publish(document(t, srv.Addr(), p))
	r := &concurrencyRig{up: &slowUpstream{hold: hold}}
	upstream := httptest.NewServer(r.up)
	t.Cleanup(upstream.Close)
	bin := proc.MustBuild(t, "cmd/sidecar")
	for range 2 {
		addrs := wait.FreeAddrs(t, 4)
		s := startSidecar(t, bin, "--namespace", namespace, "--snapshot-file", vol.path(), "--upstream", upstream.URL,
			"--proxy-bind-address", addrs[0], "--http-bind-address", addrs[1], "--grpc-bind-address", addrs[2],
			"--metrics-bind-address", addrs[3], "--forward-auth-bind-address", "", "--drain-delay", "0s",
			"--shutdown-grace", "5s", "--redis-timeout", "2s")
		waitOK(t, s, "http://"+addrs[3]+"/readyz")
		r.sidecars, r.proxies = append(r.sidecars, s), append(r.proxies, addrs[0])
	}
	return r
}

// send sends one request as team through proxy i and returns its status (0 when the
// connection failed, as to a killed sidecar).
func (r *concurrencyRig) send(i int) int {
	resp, err := http.Get("http://" + r.proxies[i] + "/api/llm") //nolint:noctx // test
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestSidecarsShareAConcurrencyLimit: 3 in flight per caller across two sidecar processes on
// one Redis, 24 clients × 6 requests of 50 ms alternating between them: the upstream never
// sees more than 3 at once, and every other request is answered 429.
func TestSidecarsShareAConcurrencyLimit(t *testing.T) {
	r := startConcurrencyRig(t, func() { time.Sleep(50 * time.Millisecond) })
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for c := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 6 {
				switch r.send((c + k) % 2) {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("144 requests: %d admitted, %d refused; at most %d in flight at the upstream", ok.Load(), refused.Load(), r.up.peak.Load())
	if peak := r.up.peak.Load(); peak > 3 || ok.Load() < 4 || ok.Load()+refused.Load() != 144 {
		t.Fatalf("%d in flight at most, %d admitted, %d refused: want at most 3 in flight, slots reused, every request answered",
			peak, ok.Load(), refused.Load())
	}
}

// TestKilledSidecarsSlotsComeBack: three requests hold every slot through sidecar 0, which
// is then killed (SIGKILL: nothing released). The other sidecar refuses the caller while
// the slots live, and admits it again within the slot ttl of the admissions.
func TestKilledSidecarsSlotsComeBack(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	r := startConcurrencyRig(t, func() { <-gate })
	t.Cleanup(open)
	taken := time.Now()
	for range 3 {
		go r.send(0)
	}
	wait.Until(t, 10*time.Second, "3 requests in flight through sidecar 0", func() bool { return r.up.now.Load() == 3 })
	if got := r.send(1); got != http.StatusTooManyRequests {
		t.Fatalf("a 4th through sidecar 1 while 3 are in flight: %d, want 429", got)
	}
	must(t, r.sidecars[0].Cmd.Process.Kill())
	<-r.sidecars[0].Exited()
	open() // the upstream answers from now on: only the slots decide
	if got := r.send(1); got != http.StatusTooManyRequests && time.Since(taken) < slotTTL {
		t.Fatalf("right after the kill: %d, want 429 while the slots live", got)
	}
	for r.send(1) != http.StatusOK {
		if time.Since(taken) > slotTTL+3*time.Second {
			t.Fatalf("the killed sidecar's slots still held %s after they were taken (slot ttl %s)", time.Since(taken), slotTTL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("admitted again %s after the slots were taken (slot ttl %s)", time.Since(taken).Round(time.Millisecond), slotTTL)
}
