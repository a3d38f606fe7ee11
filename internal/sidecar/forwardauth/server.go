package forwardauth

import (
	"context"
	"net/http"
	"net/netip"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
)

// FrontName names the forward-auth front in metrics and logs.
const FrontName = "forwardauth"

// Paths of the two protocols, as the package documentation maps them.
const (
	// ForwardAuthPath serves Caddy's forward_auth and Traefik's ForwardAuth.
	ForwardAuthPath = "/v1/forward-auth"
	// AuthRequestPath serves nginx's auth_request and ingress-nginx's auth-url.
	AuthRequestPath = "/v1/auth-request"
)

// StatusUntrusted answers a peer outside the trusted CIDRs.
const StatusUntrusted = http.StatusMisdirectedRequest

// NewServer is the forward-auth front's server over e: both paths, answered only to peers
// within trusted, with the listener limits.
func NewServer(e *engine.Engine, trusted []netip.Prefix, limits httpserver.Limits, log logr.Logger) *http.Server {
	return httpserver.New(NewHandler(e, trusted, log), limits)
}

// NewHandler is NewServer's handler.
func NewHandler(e *engine.Engine, trusted []netip.Prefix, log logr.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(ForwardAuthPath, &judge{front: verdict.Front{Name: FrontName, Engine: e, Log: log, DenyStatus: http.StatusTooManyRequests},
		read: forwardAuthRequest})
	mux.Handle(AuthRequestPath, &judge{front: verdict.Front{Name: FrontName, Engine: e, Log: log, DenyStatus: http.StatusForbidden},
		read: authRequestRequest})
	return &gate{trusted: append([]netip.Prefix(nil), trusted...), next: mux, log: log}
}

// gate answers only peers within trusted, before reading anything of their request.
type gate struct {
	trusted []netip.Prefix
	next    http.Handler
	log     logr.Logger
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.allows(r.RemoteAddr) {
		g.log.V(1).Info("refused an untrusted peer", "peer", r.RemoteAddr)
		jsonreply.Error(w, StatusUntrusted, "forward auth: this peer is not a trusted proxy")
		return
	}
	g.next.ServeHTTP(w, r)
}

func (g *gate) allows(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap().WithZone("")
	for _, p := range g.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// judge answers one protocol: read states the original request, front.DenyStatus is the
// status of a denial.
type judge struct {
	front verdict.Front
	read  func(*http.Request) (original, error)
}

// ServeHTTP judges the original request r describes. While tracing is on, its span is the
// child of the traceparent the proxy passed on.
func (j *judge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, span := tracing.StartHTTP(r.Context(), FrontName, r.Method, r.Header)
	defer span.End()
	v := j.answer(ctx, span, r)
	tracing.SetHTTPStatus(span, v.Status)
	switch v.Kind {
	case verdict.Admitted:
		ratelimitheaders.Set(w.Header(), v.Fields)
		w.WriteHeader(v.Status)
	case verdict.Denied:
		verdict.WriteDenial(w, &v)
	default:
		jsonreply.Error(w, v.Status, v.Message)
	}
}

// answer is the verdict on the auth request r.
func (j *judge) answer(ctx context.Context, span trace.Span, r *http.Request) verdict.Verdict {
	req, err := j.request(r)
	if err != nil {
		j.front.Log.V(1).Info("refused a forward-auth request", "path", r.URL.Path, "reason", err.Error())
		return j.front.Refuse(span, err)
	}
	return j.front.HTTP(ctx, span, req)
}

// request is the original request the auth request r describes, as the engine reads it.
func (j *judge) request(r *http.Request) (*requestread.HTTPRequest, error) {
	o, err := j.read(r)
	if err != nil {
		return nil, err
	}
	path, query, err := requestread.ParseTarget(o.method, o.target)
	if err != nil {
		return nil, err
	}
	header, peer, err := originalHeader(r.Header)
	if err != nil {
		return nil, err
	}
	return &requestread.HTTPRequest{Method: o.method, Host: o.host, Path: path, Query: query, Header: header, Peer: peer}, nil
}
