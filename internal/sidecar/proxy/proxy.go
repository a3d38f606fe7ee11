// Package proxy is the sidecar's reverse-proxy front: it checks each request against the
// policies its match.http selects and answers 429, or forwards it to the upstream app; both
// answers carry the RateLimit headers. A policy whose cost settles from the response
// (cost.settle) reserves its cost at admission; the proxy reads the cost the upstream's
// response states as it streams to the client, unchanged and unbuffered, and settles the
// reservation when the body ends. A policy with a concurrency limit holds a slot from the
// admission until the response body ends (or the upstream fails).
//
// Paths are matched normalized (package httppath) and forwarded exactly as matched; a path
// httppath refuses is answered 400 and never forwarded. The limiter reads the request's
// headers as the upstream will receive them (without hop-by-hop headers), and a header it
// reads that is sent on several field lines refuses the request (requestread.ErrRepeatedHeader).
package proxy

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
)

// FrontName names the reverse proxy in metrics and logs.
const FrontName = "proxy"

// Handler is the reverse proxy, as the package documentation describes. Safe for
// concurrent use.
type Handler struct {
	front verdict.Front
	rp    *httputil.ReverseProxy
	ends  ender
}

type headersKey struct{}

// New builds a proxy to upstream, deciding with e.
func New(e *engine.Engine, upstream *url.URL, log logr.Logger) *Handler {
	p := &Handler{front: verdict.Front{Name: FrontName, Engine: e, Log: log, Settles: true}, ends: ender{engine: e, log: log}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			appendXForwarded(pr)
			pr.Out.Host = pr.In.Host
			tracing.Inject(pr.In.Context(), pr.Out.Header)
		},
		ModifyResponse: func(resp *http.Response) error {
			if fields, ok := resp.Request.Context().Value(headersKey{}).([]ratelimitheaders.Field); ok {
				ratelimitheaders.Set(resp.Header, fields)
			}
			if tracing.Enabled() {
				tracing.SetHTTPStatus(trace.SpanFromContext(resp.Request.Context()), resp.StatusCode)
			}
			p.ends.watch(resp)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// No response: no cost stated (the reservation stands), but the request has ended.
			outs, _ := r.Context().Value(endsKey{}).([]*engine.Outcome)
			p.ends.ended(context.WithoutCancel(r.Context()), outs, 0, false)
			span := trace.SpanFromContext(r.Context())
			if httpserver.Stalled(r) {
				tracing.SetHTTPStatus(span, http.StatusRequestTimeout)
				log.V(1).Info("client stopped sending the request body", "method", r.Method, "path", r.URL.EscapedPath())
				jsonreply.Error(w, http.StatusRequestTimeout, "request body: nothing arrived within the read timeout")
				return
			}
			log.Error(err, "upstream request failed", "method", r.Method, "path", r.URL.EscapedPath())
			tracing.SetHTTPStatus(span, http.StatusBadGateway)
			jsonreply.Error(w, http.StatusBadGateway, "upstream unavailable")
		},
	}
	return p
}

// NewServer is the reverse proxy's server: New's handler with the listener limits, streaming
// bodies both ways.
func NewServer(e *engine.Engine, upstream *url.URL, limits httpserver.Limits, log logr.Logger) *http.Server {
	return httpserver.NewStreaming(New(e, upstream, log), limits)
}

// ServeHTTP checks and forwards one request. While tracing is on, its span is the child of
// the request's traceparent, and the upstream receives the span's own traceparent.
func (p *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, span := tracing.StartHTTP(r.Context(), FrontName, r.Method, r.Header)
	defer span.End()
	path, v := p.judge(ctx, span, r)
	if v.Kind == verdict.Admitted {
		ctx = withEnds(context.WithValue(ctx, headersKey{}, v.Fields), v.Outcomes)
		p.rp.ServeHTTP(w, withPath(r.WithContext(ctx), path))
		return
	}
	tracing.SetHTTPStatus(span, v.Status)
	if v.Kind == verdict.Denied {
		p.ends.unforwarded(ctx, v.Outcomes)
		verdict.WriteDenial(w, &v)
		return
	}
	jsonreply.Error(w, v.Status, v.Message)
}

// judge is the verdict on r, and r's normalized path.
func (p *Handler) judge(ctx context.Context, span trace.Span, r *http.Request) (httppath.Path, verdict.Verdict) {
	path, query, err := requestread.ParseTarget(r.Method, requestTarget(r))
	if err != nil {
		return path, p.front.Refuse(span, err)
	}
	return path, p.front.HTTP(ctx, span, &requestread.HTTPRequest{Method: r.Method, Host: r.Host,
		Path: path, Query: query, Header: requestread.ForwardedHeader(r.Header), Peer: r.RemoteAddr})
}

// requestTarget is r's request target as received: RequestURI, since URL.Path is already
// decoded and URL.RawPath is dropped when Go would encode differently (losing a "%2F"
// among other bytes).
func requestTarget(r *http.Request) string {
	if r.RequestURI == "" { // a request built in-process rather than read from a client
		return r.URL.RequestURI()
	}
	return r.RequestURI
}

// withPath is r with its URL's path set to the normalized one, both decoded (Path) and
// escaped (RawPath), so the upstream receives exactly the path that was matched. The query
// is unchanged.
func withPath(r *http.Request, path httppath.Path) *http.Request {
	if path.String() == httppath.Asterisk {
		return r
	}
	u := *r.URL
	u.RawPath = path.String()
	u.Path, _ = url.PathUnescape(u.RawPath) // a normalized path always decodes
	r.URL = &u
	return r
}
