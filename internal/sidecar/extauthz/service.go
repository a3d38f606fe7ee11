package extauthz

import (
	"context"
	"errors"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
)

// FrontName names the Envoy ext_authz front in metrics and logs.
const FrontName = "extauthz"

// Service is the Envoy ext_authz v3 Authorization service: it answers Check calls from the
// Engine, as the package documentation describes. Safe for concurrent use.
type Service struct {
	// Engine decides every request.
	Engine *engine.Engine
	// Log receives denials at V(1). Identities and headers are never logged.
	Log logr.Logger
}

var _ authv3.AuthorizationServer = (*Service)(nil)

// New is the ext_authz service over e, which logs its denials to log; grpcserver.New serves it.
func New(e *engine.Engine, log logr.Logger) *Service {
	return &Service{Engine: e, Log: log}
}

// Register adds the ext_authz v3 Authorization service to g.
func (s *Service) Register(g *grpc.Server) {
	authv3.RegisterAuthorizationServer(g, s)
}

// Check judges the HTTP request req describes. Its error is a gRPC status: InvalidArgument
// for a CheckRequest without an HTTP request, Unavailable before the first snapshot; every
// decision, a refused request included, is a CheckResponse.
func (s *Service) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	ctx, span := tracing.StartGRPC(ctx, FrontName)
	defer span.End()
	h := req.GetAttributes().GetRequest().GetHttp()
	if h == nil {
		tracing.EndFront(span, tracing.ResultError, 0)
		return nil, status.Error(codes.InvalidArgument, "attributes.request.http is missing: only HTTP requests are judged")
	}
	r, err := httpRequest(h, req.GetAttributes().GetSource())
	if err != nil {
		tracing.EndFront(span, tracing.ResultError, 0)
		return badRequest(err), nil
	}
	outs, err := s.Engine.DecideHTTP(ctx, FrontName, r)
	switch {
	case errors.Is(err, engine.ErrNoSnapshot):
		tracing.EndFront(span, tracing.ResultError, 0)
		return nil, status.Error(codes.Unavailable, err.Error())
	case err != nil:
		tracing.EndFront(span, tracing.ResultError, 0)
		return badRequest(err), nil
	}
	engine.LogDenials(s.Log, FrontName, outs)
	result := tracing.ResultAllowed
	if engine.Denial(outs) != nil {
		result = tracing.ResultDenied
	}
	tracing.EndFront(span, result, len(outs))
	return decision(outs), nil
}
