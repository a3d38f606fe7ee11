package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/publishing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// startBackendManager replaces the shared manager, for the rest of the test, with one in
// tenancy mode on r (the default Redis) with RedisBackends on, watching only namespaces.
func startBackendManager(t *testing.T, e *kube.Env, r *tenantRedis, grace time.Duration, namespaces ...string) {
	t.Helper()
	replaceShared(t, func() (*manager, error) {
		return startManagerSetup(e, r.admin, r.topo, managerSetup{tenants: r.tenancy(grace, 0), backends: true}, namespaces...)
	})
}

// isolation is TestRedisBackendIsolation's world: the quiet namespace on the default
// Redis, the noisy one on a RedisBackend's small one.
type isolation struct {
	quietRedis, noisyRedis *redistest.Server
	def, isolated          *tenantRedis
	quiet, noisy, backend  string
}

// TestRedisBackendIsolation is issue 39's test: a noisy tenant, moved by a RedisBackend to
// a Redis of its own (8 MB, noeviction), fills that Redis to OOM with SETs under its own
// key scope and its own credentials, while the quiet namespace on the default Redis is
// checked through the sidecar's engine built from its published snapshot: the quiet
// namespace loses nothing (its counter exact, every check decided by Redis), and the noisy
// tenant only hurts itself (its own checks go to its failure mode). Both snapshots name
// their own Redis, both Redises hold the functions, each namespace's user lives only on
// its Redis, and each Redis's memory monitor reports on its own namespaces.
func TestRedisBackendIsolation(t *testing.T) {
	e := suite(t)
	began := time.Now()
	ctx := ctxFor(t)
	w := &isolation{quietRedis: redistest.StartServer(t, adminACL(t), redistest.WithArgs(protectedRedis...)),
		noisyRedis: redistest.StartServer(t, adminACL(t), redistest.WithArgs(redistest.LimiterMemory("8mb", "10%")...))}
	w.def = adminOn(t, redisconn.ModeStandalone, []string{w.quietRedis.Addr()}, w.quietRedis)
	w.isolated = &tenantRedis{servers: []*redistest.Server{w.noisyRedis}}
	system := kube.NewNamespace(t, e, "rb-system-")
	w.quiet, w.noisy = kube.NewNamespace(t, e, "rb-quiet-"), kube.NewNamespace(t, e, "rb-noisy-")
	labelNamespace(t, e, w.noisy, w.noisy)
	w.backend = "isolated-" + w.noisy
	newBackend(t, e, w.backend, w.noisyRedis.Addr(), adminCredentials(t, e, system), w.noisy)
	startBackendManager(t, e, w.def, tenantGrace, system, w.quiet, w.noisy)

	const limit, checks = 300, 400
	for _, ns := range []string{w.quiet, w.noisy} {
		create(t, e, yearlyPolicy(ns, "api", limit))
		waitReady(t, e, ns, "api")
		waitScriptsLoaded(t, e, ns, "api")
	}
	quietCreds, noisyCreds := w.checkPlaced(ctx, t, e)

	quietSidecar := sidecarOf(t, e, w.quiet, mountSecret(t, quietCreds))
	noisySidecar := sidecarOf(t, e, w.noisy, mountSecret(t, noisyCreds))
	// The noisy tenant's own credentials, on the Redis its snapshot names.
	tenant := (&tenantRedis{topo: redisconn.Topology{Mode: redisconn.ModeStandalone, Addrs: noisySidecar.redis.Addrs}}).
		sidecarClient(t, mountSecret(t, noisyCreds))
	filled, got := fillWhileChecking(t, func() (int, error) { return fillAsTenant(ctx, tenant, w.noisy) }, checks, quietSidecar)
	used, maxMemory := memoryInfo(ctx, t, w.noisyRedis)
	t.Logf("the noisy tenant wrote %d values of 64 KiB before OOM: its Redis uses %d of %d bytes; the quiet namespace: %s",
		filled, used, maxMemory, got)
	if used < maxMemory*9/10 {
		t.Errorf("the noisy Redis uses %d of %d bytes: not full", used, maxMemory)
	}
	if got.admitted != limit || got.refused != checks-limit || got.withoutRedis != 0 {
		t.Errorf("the quiet namespace's %d checks: %s; want exactly %d admitted and %d refused, all by Redis", checks, got, limit, checks-limit)
	}
	var own tally
	own.add(noisySidecar.check(ctx, t))
	if own.withoutRedis != 1 || !strings.Contains(fmt.Sprint(own.firstErr), "OOM") {
		t.Errorf("the noisy namespace's own check on its full Redis: %s; want its failure mode, for OOM", own)
	}
	waitCondition(t, e, w.noisy, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionFalse, v1alpha1.ReasonForeignKeys)
	waitCondition(t, e, w.quiet, "api", v1alpha1.ConditionCountersProtected, metav1.ConditionTrue, v1alpha1.ReasonCountersProtected)
	if took := time.Since(began); took > 90*time.Second {
		t.Errorf("took %s, over the 90 s budget", took.Round(time.Second))
	} else {
		t.Logf("took %s", took.Round(10*time.Millisecond))
	}
}

// checkPlaced checks that each namespace is on its own Redis: the backend Ready serving
// the noisy namespace, the noisy policy's ScriptsLoaded naming it, the functions on both
// Redises, each snapshot naming its Redis, and each namespace's user on its Redis only.
// It returns the namespaces' credentials.
func (w *isolation) checkPlaced(ctx context.Context, t *testing.T, e *kube.Env) (quiet, noisy *corev1.Secret) {
	t.Helper()
	p := waitCondition(t, e, w.noisy, "api", v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionScriptsLoaded); !strings.Contains(c.Message, "RedisBackend "+w.backend) {
		t.Errorf("the noisy policy's ScriptsLoaded %q does not name its Redis", c.Message)
	}
	waitBackend(t, e, w.backend, "Ready, serving the noisy namespace", servingReady(w.noisy))
	if err := errors.Join(w.def.functionsEverywhere(ctx), w.isolated.functionsEverywhere(ctx)); err != nil {
		t.Fatalf("functions: %v", err)
	}
	for ns, addr := range map[string]string{w.quiet: w.quietRedis.Addr(), w.noisy: w.noisyRedis.Addr()} {
		if _, s := waitSnapshot(t, e, ns, "api"); s.Redis.Mode != "standalone" || !slices.Equal(s.Redis.Addrs, []string{addr}) || !s.Redis.Functions {
			t.Fatalf("the snapshot of %s names Redis %+v; want the standalone %s, with functions", ns, s.Redis, addr)
		}
	}
	quiet, noisy = waitCredentials(t, e, w.quiet), waitCredentials(t, e, w.noisy)
	wait.Eventually(t, readyTimeout, "each namespace's user on its own Redis only", func() error {
		return errors.Join(w.def.userEverywhere(ctx, t, tenantPrefix+w.quiet, string(quiet.Data["password"])),
			w.isolated.userEverywhere(ctx, t, tenantPrefix+w.noisy, string(noisy.Data["password"])),
			w.def.userNowhere(ctx, t, tenantPrefix+w.noisy), w.isolated.userNowhere(ctx, t, tenantPrefix+w.quiet))
	})
	return quiet, noisy
}

// fillWhileChecking runs fill and, meanwhile, checks caller alice n times through s: the
// first half while fill runs, the second once it has returned. It returns what fill
// wrote and the checks' outcomes; a fill error fails the test.
func fillWhileChecking(t *testing.T, fill func() (int, error), n int, s *sidecar) (int, tally) {
	t.Helper()
	var filled int
	var fillErr error
	full := make(chan struct{})
	go func() {
		defer close(full)
		filled, fillErr = fill()
	}()
	var got tally
	for i := range n {
		if i == n/2 {
			<-full
		}
		got.add(s.check(t.Context(), t))
	}
	if fillErr != nil {
		t.Fatal(fillErr)
	}
	return filled, got
}

// move is TestRedisBackendMove's world: a namespace on the default Redis (old), and the
// RedisBackend (first) whose Redis (new) it moves to.
type move struct {
	oldRedis, newRedis *redistest.Server
	def, moved         *tenantRedis
	ns, first, later   string
}

// TestRedisBackendMove: relabelling a namespace moves it, without touching its policies,
// from the default Redis to a RedisBackend's: its snapshot names the new Redis, each
// policy gets a RedisChanged Warning naming both and saying the counters start fresh, the
// backend's status lists it, its user (same password) is made on the new Redis and stays
// on the old one for the grace, then goes. A sidecar built from the new snapshot decides
// on the new Redis from a fresh counter; the old sidecar keeps deciding on the old Redis
// until the grace ends, and is refused after. A second backend selecting the namespace
// (its name sorts later) reports Conflict naming it, and its missing Secret.
func TestRedisBackendMove(t *testing.T) {
	e := suite(t)
	ctx := ctxFor(t)
	const grace = 4 * time.Second
	w := &move{oldRedis: redistest.StartServer(t, adminACL(t), redistest.WithArgs(protectedRedis...)),
		newRedis: redistest.StartServer(t, adminACL(t), redistest.WithArgs(protectedRedis...))}
	w.def = adminOn(t, redisconn.ModeStandalone, []string{w.oldRedis.Addr()}, w.oldRedis)
	w.moved = &tenantRedis{servers: []*redistest.Server{w.newRedis}}
	system := kube.NewNamespace(t, e, "mv-system-")
	w.ns = kube.NewNamespace(t, e, "mv-")
	creds := adminCredentials(t, e, system)
	w.first, w.later = "a-"+w.ns, "z-"+w.ns
	newBackend(t, e, w.first, w.newRedis.Addr(), creds, w.ns)
	// Its Secret does not exist and nothing listens at its address: only its status matters.
	newBackend(t, e, w.later, wait.FreeAddr(t), &v1alpha1.SecretReference{Namespace: system, Name: "missing"}, w.ns)
	startBackendManager(t, e, w.def, grace, system, w.ns)

	create(t, e, yearlyPolicy(w.ns, "api", 100))
	waitReady(t, e, w.ns, "api")
	waitScriptsLoaded(t, e, w.ns, "api")
	secret := waitCredentials(t, e, w.ns)
	dir := mountSecret(t, secret)
	before := sidecarOf(t, e, w.ns, dir)
	for range 5 {
		if o := before.check(ctx, t); o.Decision.WithoutRedis() || !o.Allowed {
			t.Fatalf("a check on the default Redis: %+v", o.Decision)
		}
	}
	keysBefore := keysOf(ctx, t, w.oldRedis, w.ns)

	labelNamespace(t, e, w.ns, w.ns)
	moving := time.Now()
	w.checkPublished(t, e)
	w.checkStatuses(t, e)
	wait.Eventually(t, readyTimeout, "the user on the new Redis, with the same password", func() error {
		return w.moved.userEverywhere(ctx, t, tenantPrefix+w.ns, string(secret.Data["password"]))
	})
	waitCondition(t, e, w.ns, "api", v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded)

	after := sidecarOf(t, e, w.ns, dir)
	if o := after.check(ctx, t); o.Decision.WithoutRedis() || !o.Allowed || o.Decision.Remaining != 99 {
		t.Errorf("the first check on the new Redis: %+v; want decided by Redis, from a fresh counter (99 left)", o.Decision)
	}
	if n, o := keysOf(ctx, t, w.newRedis, w.ns), keysOf(ctx, t, w.oldRedis, w.ns); n == 0 || o != keysBefore {
		t.Errorf("keys of %s: %d on the new Redis, %d on the old (%d before the move)", w.ns, n, o, keysBefore)
	}
	if time.Since(moving) < grace-time.Second { // the old sidecar, not yet given the new snapshot
		if o := before.check(ctx, t); o.Decision.WithoutRedis() {
			t.Errorf("during the grace the old sidecar's check was not decided by the old Redis: %+v", o.Decision)
		}
	}
	w.checkRetired(ctx, t, e, before, secret, moving, grace)
}

// checkPublished waits for the snapshot to name the new Redis and the RedisChanged event.
func (w *move) checkPublished(t *testing.T, e *kube.Env) {
	t.Helper()
	wait.Eventually(t, readyTimeout, "the snapshot names the new Redis", func() error {
		cm, s, err := getSnapshot(e, w.ns)
		if err != nil {
			return err
		}
		if !slices.Equal(s.Redis.Addrs, []string{w.newRedis.Addr()}) || cm.Annotations[publishing.AnnotationBackend] != w.first {
			return fmt.Errorf("names %v (backend %q)", s.Redis.Addrs, cm.Annotations[publishing.AnnotationBackend])
		}
		return nil
	})
	note := policyEvent(t, e, w.ns, "api", v1alpha1.ReasonRedisChanged)
	for _, want := range []string{"the default Redis", "RedisBackend " + w.first, "start fresh", "expire by their TTL"} {
		if !strings.Contains(note, want) {
			t.Errorf("RedisChanged event %q does not say %q", note, want)
		}
	}
}

// checkStatuses waits for the first backend to serve the namespace and the later one to
// report the conflict.
func (w *move) checkStatuses(t *testing.T, e *kube.Env) {
	t.Helper()
	waitBackend(t, e, w.first, "Ready, serving the moved namespace", servingReady(w.ns))
	conflicted := waitBackend(t, e, w.later, "Conflict over the namespace, its Secret missing", func(b *v1alpha1.RedisBackend) error {
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionConflict)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, w.ns+" (served by RedisBackend "+w.first+")") {
			return fmt.Errorf("Conflict %+v", c)
		}
		ready := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonCredentialsUnavailable ||
			!strings.Contains(ready.Message, "missing") {
			return fmt.Errorf("Ready %+v", ready)
		}
		return nil
	})
	if len(conflicted.Status.Namespaces) != 0 {
		t.Errorf("the later backend serves %v", conflicted.Status.Namespaces)
	}
}

// checkRetired waits out the grace: the user gone from the old Redis (the old sidecar then
// refused), the Secret naming the new backend with its password unchanged, and no request
// of the manager's administrative user refused on either Redis.
func (w *move) checkRetired(ctx context.Context, t *testing.T, e *kube.Env, old *sidecar, secret *corev1.Secret,
	moving time.Time, grace time.Duration) {
	t.Helper()
	wait.Eventually(t, grace+readyTimeout, "the user gone from the old Redis after the grace", func() error {
		return w.def.userNowhere(ctx, t, tenantPrefix+w.ns)
	})
	t.Logf("user removed from the old Redis %s after the move (grace %s)", time.Since(moving).Round(10*time.Millisecond), grace)
	if o := old.check(ctx, t); !o.Decision.WithoutRedis() {
		t.Errorf("after the grace a sidecar still on the old Redis was answered by it: %+v", o.Decision)
	}
	s := waitSecret(t, e, w.ns, "moved", func(s *corev1.Secret) error {
		if s.Annotations[tenancy.AnnotationBackend] != w.first {
			return fmt.Errorf("annotations %v", s.Annotations)
		}
		if _, leaving := s.Annotations[tenancy.AnnotationLeftDeleteAfter]; leaving {
			return errors.New("still retiring the user from the old Redis")
		}
		return nil
	})
	if string(s.Data["password"]) != string(secret.Data["password"]) {
		t.Error("the move changed the namespace's password")
	}
	refused := append(w.def.adminRefusals(ctx, t), redistest.ACLRefusals(ctx, t, tenantAdmin, w.newRedis)...)
	if len(refused) > 0 {
		t.Errorf("Redis refused the manager's administrative user: %v", refused)
	}
}

// TestRedisBackendMoveBack: a namespace moved to a RedisBackend and back to the default
// Redis within the grace keeps its user on the default Redis throughout (never deleted
// there), and its user on the backend's Redis goes after the grace; each move is a
// RedisChanged event, and the snapshot names the default Redis again.
func TestRedisBackendMoveBack(t *testing.T) {
	e := suite(t)
	ctx := ctxFor(t)
	const grace = 3 * time.Second
	oldRedis := redistest.StartServer(t, adminACL(t), redistest.WithArgs(protectedRedis...))
	newRedis := redistest.StartServer(t, adminACL(t), redistest.WithArgs(protectedRedis...))
	def := adminOn(t, redisconn.ModeStandalone, []string{oldRedis.Addr()}, oldRedis)
	away := &tenantRedis{servers: []*redistest.Server{newRedis}}
	system, ns := kube.NewNamespace(t, e, "back-system-"), kube.NewNamespace(t, e, "back-")
	name := "away-" + ns
	newBackend(t, e, name, newRedis.Addr(), adminCredentials(t, e, system), ns)
	startBackendManager(t, e, def, grace, system, ns)
	create(t, e, yearlyPolicy(ns, "api", 100))
	waitReady(t, e, ns, "api")
	password := string(waitCredentials(t, e, ns).Data["password"])

	labelNamespace(t, e, ns, ns)
	wait.Eventually(t, readyTimeout, "the user on the backend's Redis, named by the snapshot", func() error {
		_, s, err := getSnapshot(e, ns)
		if err != nil {
			return err
		}
		if !slices.Equal(s.Redis.Addrs, []string{newRedis.Addr()}) {
			return fmt.Errorf("the snapshot names %v", s.Redis.Addrs)
		}
		return away.userEverywhere(ctx, t, tenantPrefix+ns, password)
	})
	labelNamespace(t, e, ns, "elsewhere") // back, within the grace
	watchUntil := time.Now().Add(2*grace + time.Second)
	for time.Now().Before(watchUntil) { // the user never leaves the default Redis
		if err := def.userEverywhere(ctx, t, tenantPrefix+ns, password); err != nil {
			t.Fatalf("the namespace came back within the grace and its user left the default Redis: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wait.Eventually(t, readyTimeout, "the user gone from the backend's Redis", func() error {
		return away.userNowhere(ctx, t, tenantPrefix+ns)
	})
	if _, s := waitSnapshot(t, e, ns, "api"); !slices.Equal(s.Redis.Addrs, []string{oldRedis.Addr()}) {
		t.Errorf("the snapshot names %v, want the default Redis %s", s.Redis.Addrs, oldRedis.Addr())
	}
	wait.Eventually(t, readyTimeout, "two RedisChanged events", func() error {
		evs, err := policyEvents(e, ns, "api")
		if err != nil {
			return err
		}
		var n int32
		for _, ev := range evs {
			if ev.Reason == v1alpha1.ReasonRedisChanged {
				n += eventCount(ev)
			}
		}
		if n != 2 {
			return fmt.Errorf("%d RedisChanged events", n)
		}
		return nil
	})
}
