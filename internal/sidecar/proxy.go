package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"

	"github.com/go-logr/logr"
)

// Proxy is the reverse-proxy front: it checks each request against the policies its
// match.http selects and answers 429, or forwards it to Upstream; both answers carry the
// RateLimit headers.
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
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			if fields, ok := resp.Request.Context().Value(headersKey{}).([]HeaderField); ok {
				SetHeaders(resp.Header, fields)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Error(err, "upstream request failed", "method", r.Method, "path", r.URL.Path)
			writeError(w, http.StatusBadGateway, "upstream unavailable")
		},
	}
	return p
}

// ServeHTTP checks and forwards one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	set := p.engine.Store.Current()
	if set == nil {
		writeError(w, http.StatusServiceUnavailable, "no policy snapshot loaded yet")
		return
	}
	entries := set.MatchHTTP(r.Host, r.URL.Path, r.Method)
	checks, err := httpChecks(entries, r)
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
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), headersKey{}, fields)))
}

// httpChecks reads identity, cost and request id for every policy before any is checked, so
// a bad cost header fails the request without debiting anything.
func httpChecks(entries []*Entry, r *http.Request) (map[*Entry]Check, error) {
	checks := make(map[*Entry]Check, len(entries))
	for _, e := range entries {
		cost, err := e.HTTPCost(r.Header)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", e.Name(), err)
		}
		id, ok := e.HTTPIdentity(r.Header, r.RemoteAddr)
		c := Check{Identity: id, HasIdentity: ok, Cost: cost, RequestID: e.HTTPRequestID(r.Header)}
		if c.RequestID != "" {
			c.Fingerprint = HTTPFingerprint(r.Method, r.Host, r.URL.EscapedPath(), r.URL.RawQuery)
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
