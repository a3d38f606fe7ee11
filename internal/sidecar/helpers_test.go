package sidecar_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar"
	redistest "github.com/ratelimit-dev/ratelimit-operator/test/support/redis"
	snapshottest "github.com/ratelimit-dev/ratelimit-operator/test/support/snapshot"
)

const scNamespace = "shop"

// scPolicy is a valid policy: TokenBucket, requests per minute per X-API-Key on /api/<name>,
// changed by edits.
func scPolicy(name string, requests int64, edits ...func(*v1alpha1.RateLimitPolicySpec)) *v1alpha1.RateLimitPolicy {
	p := &v1alpha1.RateLimitPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: scNamespace, Name: name},
		Spec: v1alpha1.RateLimitPolicySpec{
			Match: v1alpha1.Match{HTTP: []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/api/" + name}}}},
			Identity: v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{
				{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}},
			}, OnMissing: v1alpha1.MissingIdentityShared},
			Algorithm:   v1alpha1.AlgorithmTokenBucket,
			Limits:      []v1alpha1.Limit{{Name: "per-minute", Requests: requests, Period: metav1.Duration{Duration: time.Minute}}},
			FailureMode: v1alpha1.FailureModeFailOpen,
		},
	}
	for _, e := range edits {
		e(&p.Spec)
	}
	return p
}

// scDoc is a sealed snapshot document of policies, compiled the way the controller does.
func scDoc(t testing.TB, policies ...*v1alpha1.RateLimitPolicy) []byte {
	t.Helper()
	return snapshottest.Document(t, scNamespace, "127.0.0.1:6379", policies...)
}

// scRig is an engine on a real redis-server with its own metrics registry.
type scRig struct {
	redis  *redistest.Server
	client *redis.Client
	engine *sidecar.Engine
	store  *sidecar.Store
	reg    *prometheus.Registry
}

// scStart starts redis-server and an engine holding policies.
func scStart(t testing.TB, opts limiter.Options, policies ...*v1alpha1.RateLimitPolicy) *scRig {
	t.Helper()
	srv := redistest.StartServer(t)
	o := srv.Options()
	o.ContextTimeoutEnabled = true
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return scStartOn(t, srv, rdb, opts, policies...)
}

func scStartOn(t testing.TB, srv *redistest.Server, rdb *redis.Client, opts limiter.Options,
	policies ...*v1alpha1.RateLimitPolicy) *scRig {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second // a loaded CI machine must not turn semantics into failure modes
	}
	lim, err := limiter.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	reg := prometheus.NewRegistry()
	m := sidecar.NewMetrics(reg)
	store := &sidecar.Store{Namespace: scNamespace, Metrics: m}
	if err := store.Load(scDoc(t, policies...), "test"); err != nil {
		t.Fatal(err)
	}
	engine := &sidecar.Engine{Store: store, Limiter: lim, Metrics: m}
	m.CountPipelines(engine)
	return &scRig{redis: srv, client: rdb, engine: engine, store: store, reg: reg}
}
