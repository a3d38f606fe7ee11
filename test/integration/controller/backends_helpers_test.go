package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// backendLabel is the namespace label this suite's RedisBackends select by; each test uses
// a value of its own, so no backend selects another test's namespaces.
const backendLabel = "ratelimit.test/redis"

// adminCredentials creates, in ns (the operator's namespace), the basic-auth Secret of
// config/redis's administrative user: a RedisBackend's credentialsSecretRef.
func adminCredentials(t testing.TB, e *kube.Env, ns string) *v1alpha1.SecretReference {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-admin"}, Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"username": tenantAdmin, "password": tenantAdminPassword}}
	create(t, e, s)
	return &v1alpha1.SecretReference{Namespace: ns, Name: s.Name}
}

// newBackend creates a RedisBackend named name on the standalone Redis at addr, reached
// with creds, selecting the namespaces labelled backendLabel=value; it is deleted when the
// test ends (it is cluster-scoped).
func newBackend(t testing.TB, e *kube.Env, name, addr string, creds *v1alpha1.SecretReference, value string) {
	t.Helper()
	b := &v1alpha1.RedisBackend{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RedisBackendSpec{
		Mode: v1alpha1.RedisModeStandalone, Addrs: []string{addr}, CredentialsSecretRef: creds,
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{backendLabel: value}}}}
	create(t, e, b)
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), b) })
}

// labelNamespace sets backendLabel=value on namespace ns.
func labelNamespace(t testing.TB, e *kube.Env, ns, value string) {
	t.Helper()
	var n corev1.Namespace
	if err := e.Client.Get(context.Background(), types.NamespacedName{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[backendLabel] = value
	if err := e.Client.Update(context.Background(), &n); err != nil {
		t.Fatalf("label namespace %s: %v", ns, err)
	}
}

// waitBackend waits until the RedisBackend named name satisfies ok for its generation, and
// returns it.
func waitBackend(t testing.TB, e *kube.Env, name, what string, ok func(*v1alpha1.RedisBackend) error) *v1alpha1.RedisBackend {
	t.Helper()
	var b v1alpha1.RedisBackend
	wait.Eventually(t, readyTimeout, "RedisBackend "+name+": "+what, func() error {
		if err := e.Client.Get(context.Background(), types.NamespacedName{Name: name}, &b); err != nil {
			return err
		}
		if b.Status.ObservedGeneration != b.Generation {
			return fmt.Errorf("observedGeneration %d of %d", b.Status.ObservedGeneration, b.Generation)
		}
		return ok(&b)
	})
	return &b
}

// servingReady says whether b is Ready, serving exactly namespaces.
func servingReady(namespaces ...string) func(*v1alpha1.RedisBackend) error {
	return func(b *v1alpha1.RedisBackend) error {
		if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c == nil ||
			c.Status != metav1.ConditionTrue || c.ObservedGeneration != b.Generation {
			return fmt.Errorf("Ready %+v", c)
		}
		if !slices.Equal(b.Status.Namespaces, namespaces) || int(b.Status.NamespaceCount) != len(namespaces) {
			return fmt.Errorf("serves %v (%d), want %v", b.Status.Namespaces, b.Status.NamespaceCount, namespaces)
		}
		return nil
	}
}

// yearlyPolicy is a fixed window of requests a year (no run crosses its end, so every
// count is exact) on /api/<name>, failing closed: a check not decided by Redis is a
// refusal whose source says so.
func yearlyPolicy(ns, name string, requests int64) *v1alpha1.RateLimitPolicy {
	return policytest.New(ns, name, policytest.Paths("/api/"+name), policytest.Algorithm(v1alpha1.AlgorithmFixedWindow),
		policytest.Limit("per-year", requests, 8760*time.Hour), policytest.FailureMode(v1alpha1.FailureModeFailClosed))
}

// sidecar is a namespace's sidecar as internal/sidecar/app builds it with no --redis-addrs:
// its engine on the published snapshot, its limiter on the Redis that snapshot names,
// authenticated with the namespace's mounted credentials.
type sidecar struct {
	engine *engine.Engine
	redis  snapshot.Redis
}

// sidecarOf reads namespace ns's published snapshot and builds its sidecar, with the
// credentials mounted at dir.
func sidecarOf(t testing.TB, e *kube.Env, ns, dir string) *sidecar {
	t.Helper()
	cm, s, err := getSnapshot(e, ns)
	if err != nil {
		t.Fatal(err)
	}
	store := &engine.Store{Namespace: ns}
	if err := store.Load([]byte(cm.Data[snapshot.DataKey]), "configmap"); err != nil {
		t.Fatal(err)
	}
	o := redisconn.Options{Mode: redisconn.Mode(s.Redis.Mode), Addrs: s.Redis.Addrs, MasterName: s.Redis.MasterName,
		DB: s.Redis.DB, CredentialsPath: dir}
	rdb, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	// A loaded CI machine must not turn a decision into a failure mode by a short timeout.
	lim, err := limiter.New(rdb, limiter.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	g := &engine.Engine{Store: store}
	g.SetLimiter(lim)
	return &sidecar{engine: g, redis: s.Redis}
}

// check asks the sidecar about one request of caller alice to policy api.
func (s *sidecar) check(ctx context.Context, t testing.TB) engine.Outcome {
	t.Helper()
	r := s.engine.Store.Current().Rule("api")
	if r == nil {
		t.Fatal("the sidecar's snapshot has no policy api")
	}
	return s.engine.Decide(ctx, "test", r, engine.Check{Identity: "alice", HasIdentity: true, Cost: 1})
}

// tally counts outcomes: admitted and refused by Redis, and decided without it.
type tally struct {
	admitted, refused, withoutRedis int
	firstErr                        error
}

func (c *tally) add(o engine.Outcome) {
	switch {
	case o.Decision.WithoutRedis():
		c.withoutRedis++
		if c.firstErr == nil {
			c.firstErr = fmt.Errorf("%s: %w", o.Decision.Source, o.Decision.Err)
		}
	case o.Allowed:
		c.admitted++
	default:
		c.refused++
	}
}

func (c tally) String() string {
	return fmt.Sprintf("%d admitted and %d refused by Redis, %d decided without it (first: %v)",
		c.admitted, c.refused, c.withoutRedis, c.firstErr)
}

// fillAsTenant writes values of 64 KiB without a TTL under namespace ns's key scope with
// the tenant's client until its Redis answers OOM; it returns how many it wrote.
func fillAsTenant(ctx context.Context, c redis.UniversalClient, ns string) (int, error) {
	value := strings.Repeat("x", 64<<10)
	for i := 0; i < 100_000; i++ {
		err := c.Set(ctx, fmt.Sprintf("{rl:%s/fill-%d}", ns, i), value, 0).Err()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "OOM "):
			return i, nil
		case err != nil:
			return i, fmt.Errorf("SET %d as the tenant: %w", i, err)
		}
	}
	return 0, errors.New("100 000 SETs of 64 KiB and Redis never answered OOM: is maxmemory set?")
}

// memoryInfo are used_memory and maxmemory of s, read as the default user.
func memoryInfo(ctx context.Context, t testing.TB, s *redistest.Server) (used, max int64) {
	t.Helper()
	text, err := s.Client().Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "used_memory":
			used = n
		case "maxmemory":
			max = n
		}
	}
	return used, max
}

// keysOf counts the keys of namespace ns's scope on s, read as the default user.
func keysOf(ctx context.Context, t testing.TB, s *redistest.Server, ns string) int {
	t.Helper()
	keys, err := s.Client().Keys(ctx, "{rl:"+ns+"/*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// policyEvent waits for an event of the policy with the reason and returns it.
func policyEvent(t testing.TB, e *kube.Env, ns, name, reason string) string {
	t.Helper()
	var note string
	wait.Eventually(t, readyTimeout, reason+" event on "+ns+"/"+name, func() error {
		evs, err := policyEvents(e, ns, name)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Reason == reason {
				if ev.Type != corev1.EventTypeWarning {
					return fmt.Errorf("%s event of type %s", reason, ev.Type)
				}
				note = ev.Note
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s", len(evs), reason)
	})
	return note
}
