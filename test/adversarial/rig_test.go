package adversarial

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/proxy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

const ns = "shop"

// rig is a sidecar's engine on a real redis-server, with its reverse proxy in front of an
// upstream that records what it was sent, and its check API.
type rig struct {
	t *testing.T
	// redis and rdb are the standalone server and its client (nil on other topologies).
	redis *redistest.Server
	rdb   *redis.Client
	// topology is the Redis the snapshots name (and whether its scripts are functions).
	topology snapshot.Redis
	store    *engine.Store
	engine   *engine.Engine
	proxy    *httptest.Server
	check    *httptest.Server
	envoy    *envoyrls.Service
	upstream *recorder
}

// recorder is the upstream: it counts the requests it gets and remembers the last one.
type recorder struct {
	hits atomic.Int64
	last atomic.Pointer[http.Request]
}

func (u *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	u.last.Store(r.Clone(context.Background()))
	_, _ = io.WriteString(w, "ok")
}

// newRig starts redis-server and a sidecar enforcing policies, its fronts served with the
// sidecar's default listener limits.
func newRig(t *testing.T, opts limiter.Options, policies ...*v1alpha1.RateLimitPolicy) *rig {
	t.Helper()
	return newRigWith(t, opts, httpserver.DefaultLimits(), policies...)
}

// serve runs srv (its handler and limits) on a loopback test listener.
func serve(t *testing.T, srv *http.Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(srv.Handler)
	ts.Config = srv
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// newRigWith is newRig with the fronts' listener limits.
func newRigWith(t *testing.T, opts limiter.Options, limits httpserver.Limits, policies ...*v1alpha1.RateLimitPolicy) *rig {
	t.Helper()
	return newRigAt(t, redistest.StartServer(t), opts, limits, policies...)
}

// newRigAt is newRigWith on the server srv, reached as its default user.
func newRigAt(t *testing.T, srv *redistest.Server, opts limiter.Options, limits httpserver.Limits,
	policies ...*v1alpha1.RateLimitPolicy) *rig {
	t.Helper()
	rdb := sidecarClient(t, srv.Options())
	r := newRigOn(t, rdb, snapshottest.Standalone(srv.Addr()), opts, limits, policies...)
	r.redis, r.rdb = srv, rdb
	return r
}

// sidecarClient is a client with options o as redisconn builds the sidecars' (context
// deadlines honoured, no retries), closed when the test ends.
func sidecarClient(t *testing.T, o *redis.Options) *redis.Client {
	o.ContextTimeoutEnabled, o.MaxRetries = true, -1
	return closeAtEnd(t, redis.NewClient(o))
}

// sidecarClusterClient is sidecarClient on Redis Cluster.
func sidecarClusterClient(t *testing.T, o *redis.ClusterOptions) *redis.ClusterClient {
	o.ContextTimeoutEnabled, o.MaxRetries = true, -1
	return closeAtEnd(t, redis.NewClusterClient(o))
}

// closeAtEnd closes c when the test ends, and returns it.
func closeAtEnd[C io.Closer](t *testing.T, c C) C {
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newRigOn is a sidecar on the Redis client rdb (any topology); topology is what the
// snapshot names.
func newRigOn(t *testing.T, rdb redis.UniversalClient, topology snapshot.Redis, opts limiter.Options, limits httpserver.Limits,
	policies ...*v1alpha1.RateLimitPolicy) *rig {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second // a loaded machine must not turn semantics into failure modes
	}
	lim, err := limiter.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	r := &rig{t: t, topology: topology, store: &engine.Store{Namespace: ns}, upstream: &recorder{}}
	r.engine = &engine.Engine{Store: r.store}
	r.engine.SetLimiter(lim)
	r.load(policies...)
	up := httptest.NewServer(r.upstream)
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	r.proxy = serve(t, httpserver.NewStreaming(proxy.New(r.engine, u, logr.Discard()), limits))
	r.check = serve(t, httpcheck.NewServer(r.engine, limits, logr.Discard()))
	r.envoy = &envoyrls.Service{Engine: r.engine}
	return r
}

// load publishes policies as the controller would and loads them, as an edit reaches the
// sidecar.
func (r *rig) load(policies ...*v1alpha1.RateLimitPolicy) {
	r.t.Helper()
	if err := r.store.Load(snapshottest.DocumentFor(r.t, ns, r.topology, policies...), "test"); err != nil {
		r.t.Fatal(err)
	}
}

// send sends one request through the proxy and returns its status; header holds name,
// value pairs, each added (so a name may repeat), Host as the request's host.
func (r *rig) send(method, path string, header ...string) int {
	r.t.Helper()
	status, err := r.trySend(method, path, header)
	if err != nil {
		r.t.Fatal(err)
	}
	return status
}

// count sends n requests and returns how many the proxy forwarded (200).
func (r *rig) count(n int, method, path string, header ...string) int {
	r.t.Helper()
	ok := 0
	for range n {
		if r.send(method, path, header...) == http.StatusOK {
			ok++
		}
	}
	return ok
}

// newPolicy is a valid policy: requests per period per X-API-Key on every path, FailClosed,
// changed by edits.
func newPolicy(name string, alg v1alpha1.Algorithm, requests int64, period time.Duration,
	edits ...func(*v1alpha1.RateLimitPolicySpec)) *v1alpha1.RateLimitPolicy {
	p := policytest.New(ns, name, policytest.Paths("/"), policytest.OnMissing(v1alpha1.MissingIdentityReject),
		policytest.Algorithm(alg), policytest.Limit("limit", requests, period),
		policytest.FailureMode(v1alpha1.FailureModeFailClosed))
	for _, e := range edits {
		e(&p.Spec)
	}
	return p
}

// onPaths restricts a policy to path prefixes.
func onPaths(prefixes ...string) func(*v1alpha1.RateLimitPolicySpec) {
	return func(s *v1alpha1.RateLimitPolicySpec) { s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: prefixes}} }
}

// idempotent turns idempotency on, keyed by the Idempotency-Key header.
func idempotent(s *v1alpha1.RateLimitPolicySpec) {
	s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: time.Minute}}
}

var algorithms = []v1alpha1.Algorithm{v1alpha1.AlgorithmTokenBucket, v1alpha1.AlgorithmSlidingWindow,
	v1alpha1.AlgorithmFixedWindow, v1alpha1.AlgorithmGCRA}

// hammer sends n requests from each of workers goroutines and counts the answers by status;
// during runs alongside (an edit, a fault) and the hammer waits for both.
func (r *rig) hammer(workers, n int, path string, header []string, during func()) map[int]int {
	r.t.Helper()
	type answer struct {
		status int
		err    error
	}
	answers := make(chan answer, workers*n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if during != nil {
			during()
		}
	}()
	for range workers {
		go func() {
			for range n {
				status, err := r.trySend(http.MethodGet, path, header)
				answers <- answer{status, err}
			}
		}()
	}
	got := map[int]int{}
	for range workers * n {
		a := <-answers
		if a.err != nil {
			r.t.Errorf("request failed: %v", a.err)
			continue
		}
		got[a.status]++
	}
	<-done
	return got
}

// trySend is send for other goroutines: errors are returned, not fatal.
func (r *rig) trySend(method, path string, header []string) (int, error) {
	req, err := http.NewRequest(method, r.proxy.URL+path, nil)
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// onlyAdmitOrDeny fails unless every answer was 200 or 429.
func onlyAdmitOrDeny(t *testing.T, got map[int]int) {
	t.Helper()
	for status, n := range got {
		if status != http.StatusOK && status != http.StatusTooManyRequests {
			t.Errorf("%d answers with status %d: want only 200 and 429 (%v)", n, status, got)
		}
	}
}
