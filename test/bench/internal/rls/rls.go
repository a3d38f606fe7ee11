// Package rls drives the sidecar's gRPC fronts, Envoy RLS v3 (internal/sidecar/envoyrls) and
// Envoy ext_authz v3 (internal/sidecar/extauthz), in this process: it compiles
// RateLimitPolicies into a snapshot as the controller does, loads it into a sidecar Store,
// serves both fronts on one loopback gRPC listener (as the sidecar does) with a limiter on a
// given Redis client, and sends ShouldRateLimit or Check calls over real HTTP/2 connections:
// from the lean client of test/bench/internal/h2grpc (the default, standing in for Envoy) or
// from grpc-go's generated clients. One driver serves both fronts (rpc).
//
// Used by test/bench/limiter (one policy per algorithm, one table) and test/bench/sidecar
// (the front in depth: pipelining on and off, CPU per decision, the deny-cache phase).
package rls

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/app"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/extauthz"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchstore"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/h2grpc"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

const (
	// Namespace of the bench snapshot and its policies.
	Namespace = "bench"
	// Domain is the Envoy RLS domain every bench policy matches.
	Domain = "edge"
	// UserKey is the descriptor entry that carries the caller's identity.
	UserKey = "user"
	// UserHeader is the request header that carries the caller's identity on ext_authz.
	UserHeader = "X-User"
	// Host is the host of every ext_authz request.
	Host = "bench.example"
)

// Policy is one bench policy: FailOpen, matching descriptors of Domain that carry
// route=Route (identity: entry UserKey) and HTTP requests under the path Route (identity:
// header UserHeader), so both gRPC fronts are measured on the same policies.
type Policy struct {
	Name      string
	Route     string
	Algorithm v1alpha1.Algorithm
	Requests  int64
	Period    time.Duration
}

// RateLimitPolicy is p as a RateLimitPolicy resource, defaulted as the webhook would.
func (p Policy) RateLimitPolicy() *v1alpha1.RateLimitPolicy {
	rlp := policytest.New(Namespace, p.Name, policytest.Paths(p.Route),
		policytest.Sources(
			v1alpha1.IdentitySource{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: UserKey}},
			policytest.Header(UserHeader)),
		policytest.OnMissing(v1alpha1.MissingIdentityShared), policytest.Algorithm(p.Algorithm),
		policytest.Limit("rate", p.Requests, p.Period), policytest.FailureMode(v1alpha1.FailureModeFailOpen))
	rlp.Spec.Match.Envoy = &v1alpha1.EnvoyMatch{Domain: Domain,
		Descriptors: []v1alpha1.DescriptorMatch{{Key: "route", Value: p.Route}}}
	(policy.Rules{}).Default(rlp)
	return rlp
}

// NewStore compiles ps into one sealed snapshot (as the controller publishes it) and loads
// it into a sidecar Store.
func NewStore(ps ...Policy) (*engine.Store, error) {
	rlps := make([]*v1alpha1.RateLimitPolicy, len(ps))
	for i, p := range ps {
		rlps[i] = p.RateLimitPolicy()
	}
	return benchstore.Load(Namespace, rlps...)
}

// Client names a load client.
type Client string

const (
	// Lean is test/bench/internal/h2grpc: requests encoded once, one reader per connection.
	Lean Client = "lean"
	// GRPCGo is grpc-go's generated clients.
	GRPCGo Client = "grpc-go"
)

// Config shapes the gRPC side.
type Config struct {
	// Client sends the calls; default Lean.
	Client Client
	// Conns is how many gRPC client connections the callers share (default 1).
	Conns int
	// StreamWorkers is grpc.NumStreamWorkers on the server; 0: a new goroutine per call.
	StreamWorkers int
}

// Sidecar is the RLS and ext_authz services on one loopback gRPC listener, with its clients.
type Sidecar struct {
	gcPrev  int // the GC target before Start, restored by Stop
	limiter *limiter.Limiter
	grpc    *grpc.Server
	addr    string
	conns   []*grpc.ClientConn // grpc-go's
	lean    []*h2grpc.Conn
}

// Start serves store's snapshot through an envoyrls.Service and an extauthz.Service whose
// limiter (built with opts) asks rdb. Stop it when done; rdb stays the caller's.
func Start(c Config, rdb redis.UniversalClient, store *engine.Store, opts limiter.Options) (*Sidecar, error) {
	lim, err := limiter.New(rdb, opts)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		lim.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	var sopts []grpc.ServerOption
	if c.StreamWorkers > 0 {
		// Workers keep their grown stacks; a goroutine per call grows a fresh one each time.
		sopts = append(sopts, grpc.NumStreamWorkers(uint32(c.StreamWorkers)))
	}
	// The process runs with the sidecar binary's GC target (--gc-percent) while it serves.
	s := &Sidecar{limiter: lim, grpc: grpc.NewServer(sopts...), gcPrev: app.SetGCPercent(app.DefaultGCPercent)}
	eng := &engine.Engine{Store: store, Metrics: engine.NewMetrics(prometheus.NewRegistry())}
	eng.SetLimiter(lim)
	envoyrls.New(eng, logr.Discard()).Register(s.grpc)
	extauthz.New(eng, logr.Discard()).Register(s.grpc)
	go func() { _ = s.grpc.Serve(lis) }()
	s.addr = lis.Addr().String()
	if err := s.dial(c); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Sidecar) dial(c Config) error {
	for range max(c.Conns, 1) {
		if c.Client == GRPCGo {
			conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return fmt.Errorf("dial: %w", err)
			}
			s.conns = append(s.conns, conn)
			continue
		}
		conn, err := h2grpc.Dial(s.addr)
		if err != nil {
			return fmt.Errorf("dial: %w", err)
		}
		s.lean = append(s.lean, conn)
	}
	return nil
}

// Limiter is the sidecar's limiter (for its PipelineStats).
func (s *Sidecar) Limiter() *limiter.Limiter { return s.limiter }

// Stop closes the clients, the server and the limiter.
func (s *Sidecar) Stop() {
	for _, c := range s.conns {
		_ = c.Close()
	}
	for _, c := range s.lean {
		_ = c.Close()
	}
	s.grpc.Stop()
	s.limiter.Close()
	debug.SetGCPercent(s.gcPrev)
}

// Call sends req to the RLS front as caller g (callers are spread over the connections).
func (s *Sidecar) Call(ctx context.Context, g int, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return call(ctx, s, rlsRPC, g, req)
}

// Caller is a load.Caller sending, for each call, one of reqs picked at random to the RLS
// front.
func (s *Sidecar) Caller(reqs []*rlsv3.RateLimitRequest) load.Caller { return caller(s, rlsRPC, reqs) }

// CheckCaller is a load.Caller sending, for each call, one of reqs picked at random to the
// ext_authz front.
func (s *Sidecar) CheckCaller(reqs []*authv3.CheckRequest) load.Caller {
	return caller(s, authzRPC, reqs)
}

// Request is a ShouldRateLimit request for one identity on route.
func Request(route, user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: Domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "route", Value: route}, {Key: UserKey, Value: user}},
	}}}
}

// Requests are n requests on route, for the identities Identity(0) to Identity(n-1).
func Requests(route string, n int) []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, max(n, 1))
	for i := range reqs {
		reqs[i] = Request(route, Identity(i))
	}
	return reqs
}

// Identity is the bench's i-th caller identity.
func Identity(i int) string { return fmt.Sprintf("user-%08d", i) }

// Outcome classifies a response of a single-descriptor request: denied, admitted by Redis,
// or admitted without Redis (FailOpen reports no current limit).
func Outcome(resp *rlsv3.RateLimitResponse) load.Outcome {
	switch {
	case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
		return load.Denied
	case len(resp.GetStatuses()) == 0 || resp.GetStatuses()[0].GetCurrentLimit() == nil:
		return load.Fallback
	default:
		return load.Admitted
	}
}
