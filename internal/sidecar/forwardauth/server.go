package forwardauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
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
	mux.Handle(ForwardAuthPath, &judge{engine: e, log: log, read: forwardAuthRequest, deny: http.StatusTooManyRequests})
	mux.Handle(AuthRequestPath, &judge{engine: e, log: log, read: authRequestRequest, deny: http.StatusForbidden})
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

// judge answers one protocol: read states the original request, deny is the status of a
// denial.
type judge struct {
	engine *engine.Engine
	log    logr.Logger
	read   func(*http.Request) (original, error)
	deny   int
}

// ServeHTTP judges the original request r describes. While tracing is on, its span is the
// child of the traceparent the proxy passed on.
func (j *judge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, span := tracing.StartHTTP(r.Context(), FrontName, r.Method, r.Header)
	defer span.End()
	status, result, decided := j.answer(ctx, w, r)
	tracing.EndFront(span, result, decided)
	tracing.SetHTTPStatus(span, status)
}

// answer writes the answer to r and returns its status, its result for the span and how
// many policies were decided.
func (j *judge) answer(ctx context.Context, w http.ResponseWriter, r *http.Request) (status int, result string, decided int) {
	req, err := j.request(r)
	if err != nil {
		j.log.V(1).Info("refused a forward-auth request", "path", r.URL.Path, "reason", err.Error())
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return http.StatusBadRequest, tracing.ResultError, 0
	}
	outs, err := j.engine.DecideHTTP(ctx, FrontName, req)
	switch {
	case errors.Is(err, engine.ErrNoSnapshot):
		jsonreply.Error(w, http.StatusServiceUnavailable, err.Error())
		return http.StatusServiceUnavailable, tracing.ResultError, 0
	case err != nil:
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return http.StatusBadRequest, tracing.ResultError, 0
	}
	fields := ratelimitheaders.For(outs)
	if d := engine.Denial(outs); d != nil {
		j.refuse(w, d, fields)
		return j.deny, tracing.ResultDenied, len(outs)
	}
	ratelimitheaders.Set(w.Header(), fields)
	w.WriteHeader(http.StatusOK)
	return http.StatusOK, tracing.ResultAllowed, len(outs)
}

// refuse answers a denial: j.deny with the RateLimit headers and the reason as text.
func (j *judge) refuse(w http.ResponseWriter, d *engine.Outcome, fields []ratelimitheaders.Field) {
	ratelimitheaders.Set(w.Header(), fields)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(j.deny)
	// text/plain naming a policy and a limit (DNS labels), never anything of the request;
	// the error is ignored as the proxy may be gone.
	_, _ = fmt.Fprintln(w, ratelimitheaders.Reason(d))
}

// request is the original request the auth request r describes, as the engine reads it.
func (j *judge) request(r *http.Request) (*engine.HTTPRequest, error) {
	o, err := j.read(r)
	if err != nil {
		return nil, err
	}
	path, query, err := engine.ParseTarget(o.method, o.target)
	if err != nil {
		return nil, err
	}
	header, peer, err := originalHeader(r.Header)
	if err != nil {
		return nil, err
	}
	return &engine.HTTPRequest{Method: o.method, Host: o.host, Path: path, Query: query, Header: header, Peer: peer}, nil
}
