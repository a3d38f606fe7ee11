package controller

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// kubelet mounts one Secret as the kubelet does (each key a link into ..data, ..data
// switched atomically to a new directory on an update), and follows the Secret in the API
// with a delay, as the kubelet's sync period and cache do.
type kubelet struct {
	dir   string
	delay time.Duration

	mu      sync.Mutex
	gen     int
	mounted map[string][]byte
	swaps   []time.Time
}

// mountLikeKubelet mounts s and follows it until the test ends.
func mountLikeKubelet(t *testing.T, e *kube.Env, s *corev1.Secret, delay time.Duration) *kubelet {
	t.Helper()
	k := &kubelet{dir: t.TempDir(), delay: delay}
	k.write(t, s.Data)
	for name := range s.Data {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(k.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.follow(ctx, t, e, types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return k
}

// follow polls the Secret and mounts each new content delay after it appeared.
func (k *kubelet) follow(ctx context.Context, t *testing.T, e *kube.Env, key types.NamespacedName) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		var s corev1.Secret
		if err := e.Client.Get(ctx, key, &s); err != nil || k.same(s.Data) {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(k.delay):
		}
		k.write(t, s.Data)
	}
}

func (k *kubelet) same(data map[string][]byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(data) == len(k.mounted) && bytes.Equal(data["password"], k.mounted["password"]) &&
		bytes.Equal(data["username"], k.mounted["username"])
}

// write publishes data as the mount's new content in one atomic switch.
func (k *kubelet) write(t *testing.T, data map[string][]byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	ts := fmt.Sprintf("..%d", k.gen)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o700); err != nil {
		t.Error(err)
		return
	}
	for name, v := range data {
		if err := os.WriteFile(filepath.Join(k.dir, ts, name), v, 0o600); err != nil {
			t.Error(err)
		}
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Error(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		t.Error(err)
	}
	k.mounted = data
	k.swaps = append(k.swaps, time.Now())
}

// swapped is when the mount last changed after the initial one; zero if never.
func (k *kubelet) swapped() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.swaps) < 2 {
		return time.Time{}
	}
	return k.swaps[len(k.swaps)-1]
}

// rotationLoad checks continuously, like sidecars under load, all reading one mount: a
// long-lived pipelining limiter (8 goroutines), a limiter whose goroutines keep growing so
// its pool dials new connections throughout, and a new client every 100 ms (a new pod).
type rotationLoad struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	bySource sync.Map // limiter.Source -> *atomic.Int64
	mu       sync.Mutex
	samples  []string // the first decisions made without Redis
	ramp     redis.UniversalClient
	fresh    atomic.Int64
}

func startRotationLoad(t *testing.T, r *tenantRedis, dir, ns string) *rotationLoad {
	t.Helper()
	ld := &rotationLoad{stop: make(chan struct{}), ramp: r.sidecarClient(t, dir)}
	p := sidecarPolicy(t, ns, "api")
	steady := newSidecarLimiter(t, r.sidecarClient(t, dir), true)
	for g := range 8 {
		ld.worker(steady, p, fmt.Sprint("steady-", g))
	}
	ramp := newSidecarLimiter(t, ld.ramp, false)
	ld.every(400*time.Millisecond, func(i int) { ld.worker(ramp, p, fmt.Sprint("ramp-", i)) })
	ld.every(100*time.Millisecond, func(i int) { ld.newPod(r, dir, p, i) })
	return ld
}

// newPod is a sidecar that starts, reads the mount, checks once and goes.
func (ld *rotationLoad) newPod(r *tenantRedis, dir string, p *limiter.Policy, i int) {
	c, err := redisconn.NewClient(redisconn.Options{Mode: r.topo.Mode, Addrs: r.topo.Addrs, CredentialsPath: dir})
	if err != nil {
		ld.record(limiter.Decision{Source: "NoClient", Err: err})
		return
	}
	defer func() { _ = c.Close() }()
	l, err := limiter.New(c, limiter.Options{Timeout: time.Second})
	if err != nil {
		ld.record(limiter.Decision{Source: "NoLimiter", Err: err})
		return
	}
	defer l.Close()
	ld.record(l.Check(context.Background(), p, limiter.Request{Identity: fmt.Sprint("pod-", i)}))
	ld.fresh.Add(1)
}

// worker checks as identity until the load stops (capped at 2 minutes).
func (ld *rotationLoad) worker(l *limiter.Limiter, p *limiter.Policy, identity string) {
	ld.wg.Add(1)
	go func() {
		defer ld.wg.Done()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
			select {
			case <-ld.stop:
				return
			default:
			}
			ld.record(l.Check(context.Background(), p, limiter.Request{Identity: identity}))
		}
	}()
}

// every calls fn every interval (with a counter) until the load stops, at most 400 times.
func (ld *rotationLoad) every(interval time.Duration, fn func(int)) {
	ld.wg.Add(1)
	go func() {
		defer ld.wg.Done()
		for i := range 400 {
			select {
			case <-ld.stop:
				return
			case <-time.After(interval):
			}
			fn(i)
		}
	}()
}

func (ld *rotationLoad) record(d limiter.Decision) {
	v, _ := ld.bySource.LoadOrStore(d.Source, &atomic.Int64{})
	v.(*atomic.Int64).Add(1)
	if d.Source != limiter.SourceRedis {
		ld.mu.Lock()
		if len(ld.samples) < 5 {
			ld.samples = append(ld.samples, fmt.Sprintf("%s: %v", d.Source, d.Err))
		}
		ld.mu.Unlock()
	}
}

// finish stops the load and returns the decisions by source.
func (ld *rotationLoad) finish() map[limiter.Source]int64 {
	close(ld.stop)
	ld.wg.Wait()
	out := map[limiter.Source]int64{}
	ld.bySource.Range(func(k, v any) bool {
		out[k.(limiter.Source)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// rotationGrace is the grace of the rotation test; the mount follows the Secret after
// kubeletDelay, well within it.
const (
	rotationGrace = 3 * time.Second
	kubeletDelay  = time.Second
)

// TestTenantRotationUnderLoad: a password rotation asked for with the rotate annotation
// under continuous checks, with the mount following the Secret a second late, answers no
// check by the failure mode: Redis accepts both passwords until the grace ends, new
// connections read the new password from the mount, and connections authenticated with the
// old one keep working after its removal. Afterwards the old password is refused.
func TestTenantRotationUnderLoad(t *testing.T) {
	e := suite(t)
	r := standaloneTenantRedis(t)
	ns := kube.NewNamespace(t, e, "rot-")
	startTenantManager(t, e, r, r.tenancy(rotationGrace, 0), ns)
	ctx := ctxFor(t)
	readyPolicy(t, e, ns, "api")
	before := waitCredentials(t, e, ns)
	k := mountLikeKubelet(t, e, before, kubeletDelay)
	ld := startRotationLoad(t, r, k.dir, ns)

	time.Sleep(time.Second)
	rotateAt := time.Now()
	askRotation(t, e, before, "first")
	after := waitSecret(t, e, ns, "rotated", func(s *corev1.Secret) error {
		if bytes.Equal(s.Data["password"], before.Data["password"]) || s.Annotations[tenancy.AnnotationRetiringHash] == "" {
			return fmt.Errorf("annotations %v", s.Annotations)
		}
		return nil
	})
	published := time.Now()
	oldPass, newPass := string(before.Data["password"]), string(after.Data["password"])
	wait.Eventually(t, rotationGrace+readyTimeout, "old password removed from Redis", func() error {
		return r.userEverywhere(ctx, t, tenantPrefix+ns, newPass)
	})
	removed := time.Now()
	connsAtRemoval := ld.ramp.PoolStats().TotalConns
	// Until the growing client has dialled a few connections; the checks below say if it did not.
	_ = wait.Poll(8*time.Second, 100*time.Millisecond, wait.Cond(func() bool {
		return ld.ramp.PoolStats().TotalConns >= connsAtRemoval+3
	}))
	time.Sleep(500 * time.Millisecond)
	counts := ld.finish()
	newConns := ld.ramp.PoolStats().TotalConns - connsAtRemoval

	t.Logf("decisions by source: %v (%d new clients); rotated %s after the request, mount switched %s after publication, old password removed %s after publication; the growing client dialled %d connections after the removal",
		counts, ld.fresh.Load(), published.Sub(rotateAt).Round(time.Millisecond), k.swapped().Sub(published).Round(time.Millisecond),
		removed.Sub(published).Round(time.Millisecond), newConns)
	switch {
	case k.swapped().IsZero() || !k.swapped().Before(removed):
		t.Fatalf("the mount switched at %v, not before the old password's removal at %v: the test proves nothing", k.swapped(), removed)
	case newConns == 0:
		t.Fatal("no connection was dialled after the removal: new connections were not exercised")
	case counts[limiter.SourceRedis] == 0:
		t.Fatal("no check was decided")
	}
	if n := total(counts) - counts[limiter.SourceRedis]; n > 0 {
		t.Errorf("%d of %d checks decided without Redis during the rotation; first: %v", n, total(counts), ld.samples)
	}
	checkOldPasswordRefused(ctx, t, r, tenantPrefix+ns, oldPass)
}

func total(m map[limiter.Source]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// askRotation asks for a rotation: the rotate annotation set to value on the Secret.
func askRotation(t testing.TB, e *kube.Env, o client.Object, value string) {
	t.Helper()
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[tenancy.AnnotationRotate] = value
	o.SetAnnotations(a)
	if err := e.Client.Patch(context.Background(), o, patch); err != nil {
		t.Fatalf("ask rotation of %s: %v", o.GetName(), err)
	}
}

// checkOldPasswordRefused: a new connection with the replaced password gets WRONGPASS.
func checkOldPasswordRefused(ctx context.Context, t *testing.T, r *tenantRedis, user, pass string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.servers[0].Addr(), Username: user, Password: pass, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("a new connection with the replaced password: %v; want WRONGPASS", err)
	}
}

// TestTenantRotationAcrossRestart: rotation state lives in the Secret, so a manager that
// restarts in the middle of a grace (its memory lost) keeps honouring the old password
// until the grace ends, then removes it; a second rotation asked for during the grace
// waits for it; a rotation period rotates without being asked.
func TestTenantRotationAcrossRestart(t *testing.T) {
	e := suite(t)
	r := standaloneTenantRedis(t)
	ns := kube.NewNamespace(t, e, "restart-")
	const grace, period = 4 * time.Second, 12 * time.Second
	m := startTenantManager(t, e, r, r.tenancy(grace, period), ns)
	ctx := ctxFor(t)
	create(t, e, newPolicy(ns, "api", 10))
	before := waitCredentials(t, e, ns)
	askRotation(t, e, before, "first")
	rotated := waitRotated(t, e, ns, before, "first")
	oldPass, newPass := string(before.Data["password"]), string(rotated.Data["password"])
	retireAfter, err := time.Parse(time.RFC3339, rotated.Annotations[tenancy.AnnotationRetireAfter])
	if err != nil {
		t.Fatal(err)
	}

	m.stop() // a new leader: nothing remembered
	m2, err := startManagerWith(e, r.admin, r.topo, r.tenancy(grace, period), ns)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.stop()
	askRotation(t, e, rotated, "second") // during the grace: waits
	wait.Consistently(t, time.Until(retireAfter)-500*time.Millisecond, "both passwords accepted during the grace", func() error {
		return r.userEverywhere(ctx, t, tenantPrefix+ns, oldPass, newPass)
	})
	third := waitRotated(t, e, ns, rotated, "second")
	if made, err := time.Parse(time.RFC3339, third.Annotations[tenancy.AnnotationPasswordCreated]); err != nil || made.Before(retireAfter) {
		t.Fatalf("second rotation made its password at %v (%v), before the first one's grace ended at %v", made, err, retireAfter)
	}
	wait.Eventually(t, grace+readyTimeout, "only the third password after its grace", func() error {
		return r.userEverywhere(ctx, t, tenantPrefix+ns, string(third.Data["password"]))
	})
	waitRotated(t, e, ns, third, "second") // the period: no new request
}

// waitRotated waits until the Secret holds a password other than prev's, with the rotation
// request handled, and returns it.
func waitRotated(t *testing.T, e *kube.Env, ns string, prev *corev1.Secret, handled string) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	wait.Eventually(t, time.Minute, "password rotated", func() error {
		if s = getSecret(t, e, ns); s == nil || bytes.Equal(s.Data["password"], prev.Data["password"]) {
			return fmt.Errorf("not rotated")
		}
		if got := s.Annotations[tenancy.AnnotationRotateHandled]; got != handled {
			return fmt.Errorf("rotate-handled %q, want %q", got, handled)
		}
		return nil
	})
	if h := redisacl.HashPassword(string(prev.Data["password"])); s.Annotations[tenancy.AnnotationRetiringHash] != h {
		t.Fatalf("retiring hash %q, want the previous password's", s.Annotations[tenancy.AnnotationRetiringHash])
	}
	return s
}
