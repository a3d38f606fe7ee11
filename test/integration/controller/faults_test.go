package controller

// Controller faults: the real manager binary SIGKILLed while it reconciles and started again,
// and a leader handover between two leader-elected managers.
//
// These tests run on a control plane of their own (isolatedEnv), not on the suite's shared
// one. The suite's shared in-process manager caches every namespace, so it would reconcile
// these tests' policies too (two writers, and a restart test that restarts nothing); and the
// manager binary has no namespace flag, so it would in turn reconcile every other test's
// namespace, publishing its own Redis endpoints there. A second kube-apiserver + etcd, started
// once for the fault, secret and RBAC tests together, keeps both sides apart.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/ratelimitpolicy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/operator"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestFaultRestartMidReconcile: 50 policies are created under a running manager binary,
// which is SIGKILLed during the burst, as soon as it has finalized a first policy; a second
// one is SIGKILLed once it has written the complete snapshot but statuses are still being
// patched; a third finishes. Every
// policy ends Ready with status.snapshot.version equal to the ConfigMap's version annotation,
// the snapshot holds exactly the 50 compiled policies, and nothing is duplicated or half
// written: one finalizer each, one condition of each type, one owner reference per policy,
// one snapshot ConfigMap, and no write after convergence.
func TestFaultRestartMidReconcile(t *testing.T) {
	e := isolatedEnv(t)
	rds := redistest.StartServer(t, redistest.WithArgs(protectedRedis...)) // healthy: no Warning is due
	kubeconfig := writeKubeconfig(t, e.Config, "")
	ns := kube.NewNamespace(t, e, "fault-")
	// No --leader-elect: out of a cluster the binary cannot elect (no flag sets the lease
	// namespace), and a SIGKILLed leader would hold its lease for the 15s default anyway.
	args := []string{"--redis-addrs", rds.Addr(), "--script-resync", "1s"}

	const n = 50
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("p%02d", i)
	}
	// Kill 1: during the burst of creates, as soon as the manager has finalized a first
	// policy; the others are still being created, finalized and evaluated, and no snapshot
	// can be out yet (it waits 250ms to coalesce).
	m1 := startBinManager(t, kubeconfig, args...)
	created := make(chan error, 1)
	go func() { created <- createAll(e, ns, names) }()
	killWhen(t, m1, "a first finalizer", func() bool {
		finalized, _ := countProgress(t, e, ns)
		return finalized > 0
	})
	t.Logf("first kill once reconciling began: %s", progress(t, e, ns))
	if err := <-created; err != nil {
		t.Fatal(err)
	}

	// Kill 2: once the second manager has published the complete snapshot (or, if the first
	// got that far, has made its first status write), before every status says so.
	m2 := startBinManager(t, kubeconfig, args...)
	cm0, _, _ := getSnapshot(e, ns)
	rvs0 := policyResourceVersions(t, e, ns)
	killWhen(t, m2, "a complete snapshot", func() bool {
		cm, s, err := getSnapshot(e, ns)
		switch {
		case err != nil || len(s.Policies) != n:
			return false
		case cm0 == nil || cm.ResourceVersion != cm0.ResourceVersion:
			return true
		}
		return !sameMap(policyResourceVersions(t, e, ns), rvs0)
	})
	t.Logf("second kill once the snapshot held all %d: %s", n, progress(t, e, ns))
	if _, ready := countProgress(t, e, ns); ready == n {
		t.Fatal("every policy was Ready before the second kill: the test killed nothing mid-reconcile")
	}

	m3 := startBinManager(t, kubeconfig, args...)
	start := time.Now()
	wait.Eventually(t, readyTimeout, "every policy Ready after the restarts", func() error {
		return everyReady(e, ns, n)
	})
	t.Logf("third manager: all %d Ready after %s", n, time.Since(start).Round(10*time.Millisecond))
	checkConverged(t, e, ns, names)
	waitScriptsLoaded(t, e, ns, names...)
	if err := scriptsLoaded(ctxFor(t), rds.Client()); err != nil {
		t.Errorf("redis: %v", err)
	}
	if warnings := warningEvents(t, e, ns); len(warnings) > 0 {
		t.Errorf("warning events: %v", warnings)
	}
	m3.term(t)
}

// createAll creates the named policies one after another.
func createAll(e *kube.Env, ns string, names []string) error {
	for i, name := range names {
		if err := e.Client.Create(context.Background(), newPolicy(ns, name, int64(10+i))); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	return nil
}

// killWhen SIGKILLs the manager as soon as cond holds (checked every 10ms, for at most
// readyTimeout).
func killWhen(t testing.TB, m *binManager, what string, cond func() bool) {
	t.Helper()
	if err := wait.Poll(readyTimeout, 10*time.Millisecond, wait.Cond(cond)); err != nil {
		t.Fatalf("no %s: %v", what, err)
	}
	m.kill()
}

// countProgress counts the policies of ns that carry the finalizer and that are Ready.
func countProgress(t testing.TB, e *kube.Env, ns string) (finalized, ready int) {
	t.Helper()
	var list v1alpha1.RateLimitPolicyList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if slices.Contains(list.Items[i].Finalizers, ratelimitpolicy.Finalizer) {
			finalized++
		}
		if readyErr(&list.Items[i]) == nil {
			ready++
		}
	}
	return finalized, ready
}

// progress describes how far the policies of ns got: finalized, Ready, in the snapshot.
func progress(t testing.TB, e *kube.Env, ns string) string {
	t.Helper()
	finalized, ready := countProgress(t, e, ns)
	published := "no snapshot"
	if _, s, err := getSnapshot(e, ns); err == nil {
		published = fmt.Sprintf("snapshot holds %d", len(s.Policies))
	}
	return fmt.Sprintf("%d finalized, %d Ready, %s", finalized, ready, published)
}

// everyReady says which of the namespace's n policies is not Ready for its generation.
func everyReady(e *kube.Env, ns string, n int) error {
	var list v1alpha1.RateLimitPolicyList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	if len(list.Items) != n {
		return fmt.Errorf("%d policies, want %d", len(list.Items), n)
	}
	for i := range list.Items {
		if err := readyErr(&list.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkConverged checks the end state after the restarts: one consistent snapshot holding
// exactly the named policies, every status pointing at it, no duplicated state, and no more
// writes.
func checkConverged(t *testing.T, e *kube.Env, ns string, names []string) {
	t.Helper()
	cm, s := waitSnapshot(t, e, ns, names...)
	if v := cm.Annotations[snapshot.AnnotationVersion]; v != s.Version {
		t.Errorf("version annotation %q, document version %q", v, s.Version)
	}
	var list v1alpha1.RateLimitPolicyList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		uids[string(p.UID)] = true
		checkNoDuplicates(t, p)
		checkPublishedIn(t, p, s)
	}
	checkOwners(t, cm, uids)
	var cms corev1.ConfigMapList
	if err := e.Client.List(context.Background(), &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 1 {
		t.Errorf("%d ConfigMaps in the namespace, want the snapshot only", len(cms.Items))
	}
	rvs := policyResourceVersions(t, e, ns)
	wait.Consistently(t, 2*time.Second, "no write after convergence", func() error {
		cur, _, err := getSnapshot(e, ns)
		if err != nil {
			return err
		}
		if cur.ResourceVersion != cm.ResourceVersion {
			return fmt.Errorf("snapshot rewritten: resourceVersion %s -> %s", cm.ResourceVersion, cur.ResourceVersion)
		}
		if now := policyResourceVersions(t, e, ns); !sameMap(now, rvs) {
			return errors.New("a policy was written again")
		}
		return nil
	})
}

// checkPublishedIn: the policy's status points at snapshot s, which holds its compiled form.
func checkPublishedIn(t *testing.T, p *v1alpha1.RateLimitPolicy, s *snapshot.Snapshot) {
	t.Helper()
	if p.Status.Snapshot == nil || p.Status.Snapshot.Name != snapshot.ConfigMapName || p.Status.Snapshot.Version != s.Version {
		t.Errorf("%s: status.snapshot %+v, ConfigMap version %s", p.Name, p.Status.Snapshot, s.Version)
	}
	j := slices.IndexFunc(s.Policies, func(sp snapshot.Entry) bool { return sp.Name == p.Name })
	if want := snapshottest.Entry(t, p); j < 0 || !reflect.DeepEqual(s.Policies[j], want) {
		t.Errorf("%s: snapshot entry differs from the compiled policy", p.Name)
	}
}

// checkOwners: the snapshot has one owner reference per policy (by UID), no other.
func checkOwners(t *testing.T, cm *corev1.ConfigMap, uids map[string]bool) {
	t.Helper()
	refs := map[string]bool{}
	for _, o := range cm.OwnerReferences {
		if refs[string(o.UID)] || !uids[string(o.UID)] {
			t.Errorf("owner reference %s/%s duplicated or of no policy", o.Name, o.UID)
		}
		refs[string(o.UID)] = true
	}
	if len(refs) != len(uids) {
		t.Errorf("%d owner references, %d policies", len(refs), len(uids))
	}
}

// checkNoDuplicates fails when a policy carries a finalizer, condition or script twice.
func checkNoDuplicates(t *testing.T, p *v1alpha1.RateLimitPolicy) {
	t.Helper()
	if n := occurrences(p.Finalizers, ratelimitpolicy.Finalizer); n != 1 {
		t.Errorf("%s: finalizer %s present %d times: %v", p.Name, ratelimitpolicy.Finalizer, n, p.Finalizers)
	}
	types := make([]string, len(p.Status.Conditions))
	for i, c := range p.Status.Conditions {
		types[i] = c.Type
	}
	sort.Strings(types)
	if len(slices.Compact(slices.Clone(types))) != len(types) {
		t.Errorf("%s: duplicated conditions %v", p.Name, types)
	}
	if len(p.Status.Scripts) != 1 {
		t.Errorf("%s: status.scripts %+v, want one", p.Name, p.Status.Scripts)
	}
}

func occurrences(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// policyResourceVersions maps each policy of the namespace to its resourceVersion.
func policyResourceVersions(t testing.TB, e *kube.Env, ns string) map[string]string {
	t.Helper()
	var list v1alpha1.RateLimitPolicyList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(list.Items))
	for _, p := range list.Items {
		out[p.Name] = p.ResourceVersion
	}
	return out
}

// warningEvents lists the Warning events of the namespace as "reason: note".
func warningEvents(t testing.TB, e *kube.Env, ns string) []string {
	t.Helper()
	evs, err := policyEvents(e, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if ev.Type == corev1.EventTypeWarning {
			out = append(out, ev.Reason+": "+ev.Note)
		}
	}
	return out
}

// Leader election timings of the handover test: short, so a takeover takes seconds, with
// room for a loaded 2-core machine (RenewDeadline well above RetryPeriod).
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 300 * time.Millisecond
	// leaseName is cmd/manager's LeaderElectionID.
	leaseName = "ratelimit-operator.policy.ratelimit.dev"
)

// TestFaultLeaderHandover: two leader-elected managers; the standby writes nothing while
// the leader lives. The leader is killed (cut off from the API server at once, as a dead
// process is, without releasing its lease); a policy is changed after the kill; the standby
// takes over once the lease expires and publishes the change. The snapshot is written
// exactly once after the kill, by the new leader, and every revision's version annotation
// matches its content.
//
// The managers run in-process (as cmd/manager builds them, plus a lease namespace and short
// lease timings): the manager binary cannot leader-elect outside a cluster, since it has no
// flag for the lease namespace (controller-runtime then reads the in-cluster service account
// namespace file) nor for the lease timings.
func TestFaultLeaderHandover(t *testing.T) {
	e := isolatedEnv(t)
	rds := redistest.StartServer(t)
	ns := kube.NewNamespace(t, e, "leader-")
	names := []string{"a", "b", "c"}
	for i, name := range names {
		create(t, e, newPolicy(ns, name, int64(10+i)))
	}
	topo := redisconn.Topology{Mode: redisconn.ModeStandalone, Addrs: []string{rds.Addr()}}
	leader := startElectable(t, e.Config, rds.Client(), topo, ns, "leader-a")
	waitElected(t, leader.manager, 30*time.Second)
	standby := startElectable(t, e.Config, rds.Client(), topo, ns, "leader-b")
	for _, name := range names {
		waitReady(t, e, ns, name)
	}
	cm, _ := waitSnapshot(t, e, ns, names...)
	revisions := watchSnapshot(t, e, ns, cm.ResourceVersion)

	// One writer: the standby does not write while the leader holds the lease.
	wait.Consistently(t, time.Second, "standby idle", func() error {
		if _, writes, _ := standby.requests.snapshot(); writes != 0 {
			return fmt.Errorf("standby sent %d writes", writes)
		}
		select {
		case <-standby.Elected():
			return errors.New("standby elected while the leader lives")
		default:
			return nil
		}
	})

	// Kill the leader, then change a policy.
	killedAt := time.Now()
	leader.kill()
	setRequests(t, e, ns, "a", 99)
	waitElected(t, standby.manager, 30*time.Second)
	t.Logf("standby elected %s after the kill (lease duration %s)", time.Since(killedAt).Round(10*time.Millisecond), leaseDuration)
	got := waitReady(t, e, ns, "a")
	_, s := waitSnapshot(t, e, ns, names...)
	if s.Policies[0].Limits[0].Requests != 99 {
		t.Errorf("snapshot entry of a: %+v, want 99 requests", s.Policies[0].Limits)
	}
	if got.Status.Snapshot == nil || got.Status.Snapshot.Version != s.Version {
		t.Errorf("a: status.snapshot %+v, snapshot version %s", got.Status.Snapshot, s.Version)
	}
	for _, name := range names {
		if p := waitReady(t, e, ns, name); p.Status.Snapshot == nil || p.Status.Snapshot.Version != s.Version {
			t.Errorf("%s: status.snapshot %+v, snapshot version %s", name, p.Status.Snapshot, s.Version)
		}
	}
	time.Sleep(time.Second) // a second write would show up by now
	checkRevisions(t, revisions(), "leader-b")
	t.Logf("old leader: %d requests refused after the kill", leader.refused.Load())
}

// electable is an in-process leader-elected manager that can be killed.
type electable struct {
	*manager
	dead    atomic.Bool
	refused atomic.Int64 // requests refused since the kill
}

// kill cuts the manager off from the API server at once, as its death would (no lease
// release, no last write), then stops it in the background.
func (k *electable) kill() {
	k.dead.Store(true)
	go k.stop()
}

func (k *electable) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if k.dead.Load() {
			k.refused.Add(1)
			return nil, errors.New("killed: this manager is dead")
		}
		return rt.RoundTrip(req)
	})
}

// startElectable starts a leader-elected manager with cmd/manager's controllers and cache,
// its lease in ns, its cache limited to ns, its API writes attributed to agent (the field
// manager the API server derives from the user agent). It does not wait to be elected.
func startElectable(t testing.TB, base *rest.Config, rdb redis.UniversalClient, topo redisconn.Topology, ns, agent string) *electable {
	t.Helper()
	counter, ks := &requestCounter{}, &electable{}
	cfg := rest.CopyConfig(base)
	cfg.UserAgent = agent + "/test"
	cfg.Wrap(ks.wrap)
	cfg.Wrap(counter.wrap)
	opts := managerOptions(ns)
	opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace = true, leaseName, ns
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = ptr.To(leaseDuration), ptr.To(renewDeadline), ptr.To(retryPeriod)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatalf("create manager %s: %v", agent, err)
	}
	if err := controller.Setup(mgr, rdb, topo, controller.Config{Resync: resync}); err != nil {
		t.Fatalf("set up controllers of %s: %v", agent, err)
	}
	ks.manager = &manager{Manager: operator.Launch(mgr), requests: counter}
	t.Cleanup(ks.stop)
	return ks
}

func waitElected(t testing.TB, m *manager, timeout time.Duration) {
	t.Helper()
	if err := m.WaitElected(timeout); err != nil {
		t.Fatal(err)
	}
}

// revision is one version of the snapshot ConfigMap seen by a watch.
type revision struct {
	event      watch.EventType
	rv         string
	annotation string
	data       string
	managers   []string
}

// watchSnapshot records every change of the namespace's snapshot ConfigMap after rv; the
// returned function lists them so far.
func watchSnapshot(t testing.TB, e *kube.Env, ns, rv string) func() []revision {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + snapshot.ConfigMapName, ResourceVersion: rv})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []revision
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			r := revision{event: ev.Type, rv: cm.ResourceVersion,
				annotation: cm.Annotations[snapshot.AnnotationVersion], data: cm.Data[snapshot.DataKey]}
			for _, f := range cm.ManagedFields {
				r.managers = append(r.managers, f.Manager)
			}
			mu.Lock()
			seen = append(seen, r)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return func() []revision {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// checkRevisions wants exactly one write, an update by writer, whose version annotation
// matches its content.
func checkRevisions(t *testing.T, revs []revision, writer string) {
	t.Helper()
	for _, r := range revs {
		s, err := snapshot.Parse([]byte(r.data))
		switch {
		case err != nil:
			t.Errorf("revision %s (%s): %v", r.rv, r.event, err)
		case r.annotation != s.Version:
			t.Errorf("revision %s: annotation %s, content version %s", r.rv, r.annotation, s.Version)
		}
	}
	if len(revs) != 1 || revs[0].event != watch.Modified || !slices.Contains(revs[0].managers, writer) {
		desc := make([]string, len(revs))
		for i, r := range revs {
			desc[i] = fmt.Sprintf("%s rv %s by %v", r.event, r.rv, r.managers)
		}
		t.Errorf("snapshot writes after the kill: %v, want one update by %s", desc, writer)
	}
}

// Isolated control plane and manager binary, shared by the fault, secret and RBAC tests and
// removed when TestMain ends.
var (
	isoOnce sync.Once
	isoEnv  *kube.Env
	isoErr  error

	binOnce sync.Once
	binPath string
	binErr  error
)

// isolatedEnv is a kube-apiserver + etcd of these tests' own (see the top of this file),
// once suite has found the suite's harness running (or skipped the test without it).
func isolatedEnv(t testing.TB) *kube.Env {
	t.Helper()
	suite(t)
	isoOnce.Do(func() {
		start := time.Now()
		isoEnv, isoErr = kube.Start()
		if isoErr != nil {
			return
		}
		mainT.Logf("isolated control plane started in %s", time.Since(start).Round(10*time.Millisecond))
		mainT.Cleanup(func() {
			if err := isoEnv.Stop(); err != nil {
				mainT.Errorf("stop isolated control plane: %v", err)
			}
		})
	})
	if isoErr != nil {
		// The suite's own control plane started (suite passed): this one must too.
		t.Fatalf("isolated control plane: %v", isoErr)
	}
	return isoEnv
}

// managerBinary builds cmd/manager once for the test binary.
func managerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ratelimit-manager-")
		if err != nil {
			binErr = err
			return
		}
		mainT.Cleanup(func() { _ = os.RemoveAll(dir) })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binPath, binErr = proc.Build(ctx, dir, "cmd/manager")
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// writeKubeconfig writes a kubeconfig for cfg's cluster admin, impersonating user when set.
func writeKubeconfig(t testing.TB, cfg *rest.Config, user string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteKubeconfigAs(cfg, path, user); err != nil {
		t.Fatal(err)
	}
	return path
}

// binManager is one run of the manager binary.
type binManager struct {
	cmd    *exec.Cmd
	out    *proc.Buffer
	exited chan struct{}
	err    error // how it exited; set before exited is closed
}

// startBinManager runs the manager binary with the kubeconfig, webhooks off, probes on a
// free loopback port and metrics off unless args set them, and waits for /readyz.
func startBinManager(t testing.TB, kubeconfig string, args ...string) *binManager {
	t.Helper()
	return startBinManagerEnv(t, nil, kubeconfig, args...)
}

// startBinManagerEnv is startBinManager with extra environment variables.
func startBinManagerEnv(t testing.TB, env []string, kubeconfig string, args ...string) *binManager {
	t.Helper()
	bin := managerBinary(t)
	probe := wait.FreeAddr(t)
	full := append([]string{"--kubeconfig", kubeconfig, "--webhooks=false", "--health-probe-bind-address", probe}, args...)
	if !slices.Contains(args, "--metrics-bind-address") {
		full = append(full, "--metrics-bind-address", "0")
	}
	m := &binManager{out: &proc.Buffer{}, exited: make(chan struct{})}
	m.cmd = exec.Command(bin, full...)
	if env != nil {
		m.cmd.Env = append(os.Environ(), env...)
	}
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start manager: %v", err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			t.Logf("manager %d output (tail):\n%s", m.cmd.Process.Pid, lastLines(m.output(), 40))
		}
	})
	wait.HTTPStatus(t, nil, "http://"+probe+"/readyz", http.StatusOK, 60*time.Second, m.gone)
	return m
}

// gone says how the manager exited, or nil while it runs.
func (m *binManager) gone() error {
	select {
	case <-m.exited:
		return fmt.Errorf("manager %w:\n%s", wait.Exit(m.err), lastLines(m.output(), 40))
	default:
		return nil
	}
}

// kill SIGKILLs the manager (by its PID) and waits for it to be reaped.
func (m *binManager) kill() {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Kill()
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
	}
}

// term stops the manager with SIGTERM and fails the test unless it exits cleanly in 30s.
func (m *binManager) term(t testing.TB) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM manager: %v", err)
	}
	select {
	case <-m.exited:
		if m.err != nil {
			t.Errorf("manager exited with %v after SIGTERM", m.err)
		}
	case <-time.After(30 * time.Second):
		m.kill()
		t.Error("manager did not stop within 30s of SIGTERM")
	}
}

// output is everything the manager wrote to stdout and stderr so far.
func (m *binManager) output() string { return m.out.String() }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
