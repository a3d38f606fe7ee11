// Package sidecartest is what the tests of the sidecar's packages share: valid policies for
// the HTTP and the Envoy fronts, their snapshot documents, a Store holding them, an Engine on
// a real redis-server or on a closed port, reading its metrics, and recording and checking
// its spans. Only tests import it.
package sidecartest

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// Namespace is the namespace of every policy and snapshot here.
const Namespace = "shop"

// EnvoyDomain is the Envoy RLS domain of EnvoyPolicy.
const EnvoyDomain = "edge"

// Policy is a valid policy: TokenBucket, requests per minute per X-API-Key on /api/<name>,
// FailOpen, changed by edits.
func Policy(name string, requests int64, edits ...func(*v1alpha1.RateLimitPolicySpec)) *v1alpha1.RateLimitPolicy {
	p := policytest.New(Namespace, name, policytest.Paths("/api/"+name),
		policytest.OnMissing(v1alpha1.MissingIdentityShared), policytest.Limit("per-minute", requests, time.Minute),
		policytest.FailureMode(v1alpha1.FailureModeFailOpen))
	for _, e := range edits {
		e(&p.Spec)
	}
	return p
}

// EnvoyPolicy is a valid policy on domain EnvoyDomain for descriptors whose "route" entry is
// route: a token bucket of requests per period (limit "per-period"), per value of the "user"
// entry, FailClosed (so a Redis problem can never pass for an admitted request). edits
// adjust it.
func EnvoyPolicy(name, route string, requests int64, period time.Duration, edits ...func(*v1alpha1.RateLimitPolicySpec)) *v1alpha1.RateLimitPolicy {
	envoy := func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match = v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: EnvoyDomain,
			Descriptors: []v1alpha1.DescriptorMatch{{Key: "route", Value: route}}}}
		s.Identity.Sources = []v1alpha1.IdentitySource{
			{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "user"}},
		}
		s.Limits = []v1alpha1.Limit{{Name: "per-period", Requests: requests, Period: metav1.Duration{Duration: period}}}
		s.FailureMode = v1alpha1.FailureModeFailClosed
	}
	return Policy(name, requests, append([]func(*v1alpha1.RateLimitPolicySpec){envoy}, edits...)...)
}

// IdempotentPolicy is Policy with idempotency (default maxReplays 3) on the whole site.
func IdempotentPolicy(name string, requests int64) *v1alpha1.RateLimitPolicy {
	return Policy(name, requests, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/"}}}
		s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: time.Minute}}
	})
}

// Doc is the sealed snapshot document of policies, compiled the way the controller does.
func Doc(t testing.TB, policies ...*v1alpha1.RateLimitPolicy) []byte {
	t.Helper()
	return snapshottest.Document(t, Namespace, "127.0.0.1:6379", policies...)
}

// Reseal is s, edited by hand, sealed again and encoded, as a hand-written snapshot file (or
// a newer controller) could present it.
func Reseal(t testing.TB, s *snapshot.Snapshot) []byte {
	t.Helper()
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	doc, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// Store is a Store of Namespace holding the snapshot of policies.
func Store(t testing.TB, policies ...*v1alpha1.RateLimitPolicy) *engine.Store {
	t.Helper()
	s := &engine.Store{Namespace: Namespace}
	if err := s.Load(Doc(t, policies...), "test"); err != nil {
		t.Fatalf("load snapshot: %v", err)
	}
	return s
}

// Set is the snapshot of policies, loaded.
func Set(t testing.TB, policies ...*v1alpha1.RateLimitPolicy) *engine.Set {
	t.Helper()
	return Store(t, policies...).Current()
}

// Rig is an engine on a real redis-server with its own metrics registry.
type Rig struct {
	// Redis is the server.
	Redis *redistest.Server
	// Engine decides with a limiter on Redis.
	Engine *engine.Engine
	// Store is the engine's store.
	Store *engine.Store
	// Reg holds the engine's and the store's metrics.
	Reg *prometheus.Registry
}

// Start starts redis-server and an engine holding policies, its limiter built with opts.
func Start(t testing.TB, opts limiter.Options, policies ...*v1alpha1.RateLimitPolicy) *Rig {
	t.Helper()
	srv := redistest.StartServer(t)
	o := srv.Options()
	o.ContextTimeoutEnabled = true // as redisconn builds it
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return StartOn(t, srv, rdb, opts, policies...)
}

// StartOn is Start on the running srv, asked through rdb.
func StartOn(t testing.TB, srv *redistest.Server, rdb *redis.Client, opts limiter.Options,
	policies ...*v1alpha1.RateLimitPolicy) *Rig {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second // a loaded CI machine must not turn semantics into failure modes
	}
	reg := prometheus.NewRegistry()
	m := engine.NewMetrics(reg)
	if opts.Leases.OnLease == nil {
		opts.Leases.OnLease = m.LeaseTaken // as the sidecar wires it
	}
	lim, err := limiter.New(rdb, opts)
	if err != nil {
		t.Fatalf("limiter: %v", err)
	}
	t.Cleanup(lim.Close)
	store := &engine.Store{Namespace: Namespace, Metrics: m}
	if err := store.Load(Doc(t, policies...), "test"); err != nil {
		t.Fatal(err)
	}
	e := &engine.Engine{Store: store, Metrics: m}
	e.SetLimiter(lim)
	m.CountPipelines(e)
	return &Rig{Redis: srv, Engine: e, Store: store, Reg: reg}
}

// JWT is an Authorization value carrying an unsigned token whose payload is payload.
func JWT(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return "Bearer " + enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(payload)) + ".sig"
}

// Logs collects the lines a Logger writes (up to 1000), for tests that read what a front
// logged.
type Logs struct{ lines chan string }

// Logger is a logger at V(1) writing into the returned Logs.
func Logger() (logr.Logger, *Logs) {
	l := &Logs{lines: make(chan string, 1000)}
	return funcr.New(func(prefix, args string) {
		select {
		case l.lines <- prefix + " " + args:
		default:
		}
	}, funcr.Options{Verbosity: 1}), l
}

// All drains and returns the lines written so far.
func (l *Logs) All() []string {
	var out []string
	for {
		select {
		case s := <-l.lines:
			out = append(out, s)
		default:
			return out
		}
	}
}
