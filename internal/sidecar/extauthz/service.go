package extauthz

import (
	"context"
	"net/http"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
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
	f := verdict.Front{Name: FrontName, Engine: s.Engine, Log: s.Log}
	h := req.GetAttributes().GetRequest().GetHttp()
	if h == nil {
		v := f.Reject(span, http.StatusBadRequest, "attributes.request.http is missing: only HTTP requests are judged")
		return nil, status.Error(codes.InvalidArgument, v.Message)
	}
	v := judge(ctx, span, &f, h, req.GetAttributes().GetSource())
	if v.Kind == verdict.Unavailable {
		return nil, status.Error(codes.Unavailable, v.Message)
	}
	return response(&v), nil
}

// judge is f's verdict on the HTTP request h describes, from peer src.
func judge(ctx context.Context, span trace.Span, f *verdict.Front, h *authv3.AttributeContext_HttpRequest,
	src *authv3.AttributeContext_Peer) verdict.Verdict {
	r, err := httpRequest(h, src)
	if err != nil {
		return f.Refuse(span, err)
	}
	return f.HTTP(ctx, span, r)
}
