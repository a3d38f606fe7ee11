package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/httpserver"
)

// Proxy is the reverse-proxy front: it checks each request against the policies its
// match.http selects and answers 429, or forwards it to Upstream; both answers carry the
// RateLimit headers. Paths are matched normalized (package httppath) and forwarded exactly as
// matched; a path httppath refuses is answered 400 and never forwarded.
type Proxy struct {
	engine *Engine
	log    logr.Logger
	rp     *httputil.ReverseProxy
}

type headersKey struct{}

// NewProxy builds a proxy to upstream.
func NewProxy(engine *Engine, upstream *url.URL, log logr.Logger) *Proxy {
	p := &Proxy{engine: engine, log: log}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			appendXForwarded(pr)
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			if fields, ok := resp.Request.Context().Value(headersKey{}).([]HeaderField); ok {
				SetHeaders(resp.Header, fields)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if httpserver.Stalled(r) {
				log.V(1).Info("client stopped sending the request body", "method", r.Method, "path", r.URL.EscapedPath())
				writeError(w, http.StatusRequestTimeout, "request body: nothing arrived within the read timeout")
				return
			}
			log.Error(err, "upstream request failed", "method", r.Method, "path", r.URL.EscapedPath())
			writeError(w, http.StatusBadGateway, "upstream unavailable")
		},
	}
	return p
}

// ServeHTTP checks and forwards one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, err := requestPath(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "path: "+err.Error())
		return
	}
	set := p.engine.Store.Current()
	if set == nil {
		writeError(w, http.StatusServiceUnavailable, "no policy snapshot loaded yet")
		return
	}
	header := forwardedHeader(r.Header)
	overrides, err := MethodOverrides(header)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	entries := set.MatchHTTP(r.Host, path, r.Method, overrides...)
	fp := HTTPFingerprint(strings.Join(append([]string{strings.ToUpper(r.Method)}, overrides...), " "), r.Host, path.String(), r.URL.RawQuery)
	checks, err := httpChecks(entries, header, r.RemoteAddr, fp)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	outs := p.engine.DecideAll(r.Context(), FrontProxy, entries, func(e *Entry) Check { return checks[e] })
	fields := RateLimitHeaders(outs)
	if d := Denial(outs); d != nil {
		p.deny(w, d, fields)
		return
	}
	p.rp.ServeHTTP(w, withPath(r.WithContext(context.WithValue(r.Context(), headersKey{}, fields)), path))
}

// requestPath is the normalized path of r's request target as received: RequestURI, since
// URL.Path is already decoded and URL.RawPath is dropped when Go would encode differently
// (losing a "%2F" among other bytes).
func requestPath(r *http.Request) (httppath.Path, error) {
	target := r.RequestURI
	if target == "" { // a request built in-process rather than read from a client
		target = r.URL.RequestURI()
	}
	return httppath.ParseTarget(r.Method, httppath.TargetPath(target))
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

// appendXForwarded sets X-Forwarded-Host and -Proto, and appends the peer address to the
// inbound X-Forwarded-For (as nginx's $proxy_add_x_forwarded_for does), where
// ProxyRequest.SetXForwarded alone would replace it. The rightmost entry is the peer the
// sidecar saw; the entries to its left are only as trustworthy as the proxies in front.
func appendXForwarded(pr *httputil.ProxyRequest) {
	prior := forwardedHeader(pr.In.Header).Values("X-Forwarded-For")
	pr.SetXForwarded()
	if peer := pr.Out.Header.Get("X-Forwarded-For"); peer != "" && len(prior) > 0 {
		pr.Out.Header.Set("X-Forwarded-For", strings.Join(prior, ", ")+", "+peer)
	}
}

// httpChecks reads identity, cost and request id for every policy before any is checked, so
// a bad or ambiguous header fails the request without debiting anything. h is the request's
// header as the upstream will see it (forwardedHeader); fingerprint describes the request
// for idempotency (HTTPFingerprint).
func httpChecks(entries []*Entry, h http.Header, peer, fingerprint string) (map[*Entry]Check, error) {
	checks := make(map[*Entry]Check, len(entries))
	for _, e := range entries {
		c, err := e.HTTPCheck(h, peer)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", e.Name(), err)
		}
		if c.RequestID != "" {
			c.Fingerprint = fingerprint
		}
		checks[e] = c
	}
	return checks, nil
}

func (p *Proxy) deny(w http.ResponseWriter, d *Outcome, fields []HeaderField) {
	SetHeaders(w.Header(), fields)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = fmt.Fprintln(w, denyMessage(d)) // the client may be gone
}

func denyMessage(d *Outcome) string {
	switch {
	case d.Rejected:
		return fmt.Sprintf("rate limited: policy %s requires an identity and the request has none", d.Entry.Name())
	case d.Decision.WithoutRedis():
		return fmt.Sprintf("rate limited by policy %s: Redis is unavailable and its failure mode is %s", d.Entry.Name(), d.Entry.Spec.FailureMode)
	case d.Decision.RetryAfter < 0:
		return fmt.Sprintf("rate limited by policy %s (limit %s): the request costs more than the limit holds", d.Entry.Name(), d.Decision.LimitName)
	}
	return fmt.Sprintf("rate limited by policy %s (limit %s); retry after %ss", d.Entry.Name(),
		d.Decision.LimitName, strconv.FormatInt(ceilSeconds(d.Decision.RetryAfter), 10))
}
