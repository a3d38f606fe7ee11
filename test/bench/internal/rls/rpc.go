package rls

import (
	"context"
	"fmt"
	"math/rand/v2"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/h2grpc"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
)

// rpc is one gRPC front's method as the driver calls it: its HTTP/2 path (for the lean
// client), its grpc-go call, a new response to decode into, and how an answer counts.
type rpc[Req, Resp proto.Message] struct {
	name    string
	path    string
	goCall  func(ctx context.Context, conn *grpc.ClientConn, req Req) (Resp, error)
	newResp func() Resp
	outcome func(Resp) load.Outcome
}

// rlsRPC is the RLS front's ShouldRateLimit.
var rlsRPC = rpc[*rlsv3.RateLimitRequest, *rlsv3.RateLimitResponse]{
	name: "ShouldRateLimit",
	path: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
	goCall: func(ctx context.Context, conn *grpc.ClientConn, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
	},
	newResp: func() *rlsv3.RateLimitResponse { return &rlsv3.RateLimitResponse{} },
	outcome: Outcome,
}

// authzRPC is the ext_authz front's Check.
var authzRPC = rpc[*authv3.CheckRequest, *authv3.CheckResponse]{
	name: "Check",
	path: "/envoy.service.auth.v3.Authorization/Check",
	goCall: func(ctx context.Context, conn *grpc.ClientConn, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		return authv3.NewAuthorizationClient(conn).Check(ctx, req)
	},
	newResp: func() *authv3.CheckResponse { return &authv3.CheckResponse{} },
	outcome: CheckOutcome,
}

// call sends req through m as caller g (callers are spread over the connections).
func call[Req, Resp proto.Message](ctx context.Context, s *Sidecar, m rpc[Req, Resp], g int, req Req) (Resp, error) {
	if len(s.lean) == 0 {
		resp, err := m.goCall(ctx, s.conns[g%len(s.conns)], req)
		if err != nil {
			return resp, fmt.Errorf("%s: %w", m.name, err)
		}
		return resp, nil
	}
	enc, err := encode(s, m, req)
	if err != nil {
		var zero Resp
		return zero, err
	}
	return callLean(s, m, g, enc)
}

func encode[Req, Resp proto.Message](s *Sidecar, m rpc[Req, Resp], req Req) (h2grpc.Request, error) {
	msg, err := proto.Marshal(req)
	if err != nil {
		return h2grpc.Request{}, fmt.Errorf("%s: marshal: %w", m.name, err)
	}
	return h2grpc.Encode(s.addr, m.path, msg), nil
}

func callLean[Req, Resp proto.Message](s *Sidecar, m rpc[Req, Resp], g int, req h2grpc.Request) (Resp, error) {
	resp := m.newResp()
	r, err := s.lean[g%len(s.lean)].Call(req)
	if err != nil {
		return resp, fmt.Errorf("%s: %w", m.name, err)
	}
	if r.Status != 0 {
		return resp, fmt.Errorf("%s: grpc-status %d", m.name, r.Status)
	}
	if err := proto.Unmarshal(r.Message, resp); err != nil {
		return resp, fmt.Errorf("%s: response: %w", m.name, err)
	}
	return resp, nil
}

// caller is a load.Caller sending, for each call, one of reqs picked at random through m.
// For the lean client the requests are encoded here, once.
func caller[Req, Resp proto.Message](s *Sidecar, m rpc[Req, Resp], reqs []Req) load.Caller {
	outcomeOf := func(resp Resp, err error) (load.Outcome, error) {
		if err != nil {
			return load.Fallback, err
		}
		return m.outcome(resp), nil
	}
	if len(s.lean) == 0 {
		return func(ctx context.Context, g int, rng *rand.Rand) (load.Outcome, error) {
			return outcomeOf(call(ctx, s, m, g, reqs[rng.IntN(len(reqs))]))
		}
	}
	enc := make([]h2grpc.Request, len(reqs))
	for i, r := range reqs {
		e, err := encode(s, m, r)
		if err != nil {
			return func(context.Context, int, *rand.Rand) (load.Outcome, error) { return load.Fallback, err }
		}
		enc[i] = e
	}
	return func(_ context.Context, g int, rng *rand.Rand) (load.Outcome, error) {
		return outcomeOf(callLean(s, m, g, enc[rng.IntN(len(enc))]))
	}
}
