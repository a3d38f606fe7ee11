package engine

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

// ErrRepeatedHeader refuses a request that sends a header the limiter reads on several field
// lines: the limiter would read one value while the upstream may read the first, the last or
// all of them joined, and the two would disagree about who the caller is, what the request
// costs or whether it is a retry.
var ErrRepeatedHeader = errors.New("sent on several field lines, so the limiter and the upstream could read different values")

// HTTPRequest is an HTTP request as the engine reads it. A front that sees whole HTTP
// requests (the reverse proxy, and forward auth or ext_authz alike) fills one.
type HTTPRequest struct {
	// Method is the request method as sent.
	Method string
	// Host is the request's host as sent (any port, any case): the Host header, or the
	// host the gateway routed on. One that is not a host name (canonicalHost) makes the
	// request a bad request.
	Host string
	// Path is the request target's normalized path (httppath.ParseTarget).
	Path httppath.Path
	// Query is the request target's raw query.
	Query string
	// Header is the request's header as the upstream will receive it: a header the upstream
	// never sees must decide nothing.
	Header http.Header
	// Peer is the connection's remote address (host:port or host).
	Peer string
}

// PlanHTTP matches r and reads every matched rule's check (identity, cost and request id)
// before any is decided, so a bad host or an ambiguous header fails the request without
// debiting anything. checks is parallel to rules, as DecideAll takes them.
func (s *Set) PlanHTTP(r *HTTPRequest) (rules []*Rule, checks []Check, err error) {
	host, err := canonicalHost(r.Host)
	if err != nil {
		return nil, nil, err
	}
	overrides, err := methodOverrides(r.Header)
	if err != nil {
		return nil, nil, err
	}
	rules = s.matchHTTP(host, r.Path, r.Method, overrides)
	method := upperASCII(r.Method)
	if len(overrides) > 0 {
		method = overrides[0] // the method the upstream will run
	}
	fp := httpFingerprint(strings.Join(append([]string{strings.ToUpper(r.Method)}, overrides...), " "), host, r.Path.String(), r.Query)
	view := httpView{host: host, path: r.Path, sent: upperASCII(r.Method), overrides: overrides}
	checks = make([]Check, len(rules))
	for i, rule := range rules {
		c, err := rule.httpCheck(r.Header, r.Peer, &view)
		if err != nil {
			return nil, nil, fmt.Errorf("policy %s: %w", rule.Name(), err)
		}
		if c.RequestID != "" {
			c.Fingerprint = fp
		}
		if c.Tier, err = rule.httpTier(&c, r, method, host); err != nil {
			return nil, nil, fmt.Errorf("policy %s: %w", rule.Name(), err)
		}
		checks[i] = c
	}
	return rules, checks, nil
}

// HTTPCheck reads r's check of an HTTP request from its headers and its peer address:
// identity, cost and request id. Every header it reads goes through readHeader, so a
// header sent twice refuses the request (ErrRepeatedHeader) whatever it is used for.
// The Method and PathPrefix sources yield nothing here (see HTTPIdentity); PlanHTTP reads
// them.
func (r *Rule) HTTPCheck(h http.Header, peer string) (Check, error) {
	return r.httpCheck(h, peer, nil)
}

// httpCheck is HTTPCheck with the request view v for the Method and PathPrefix sources.
func (r *Rule) httpCheck(h http.Header, peer string, v *httpView) (Check, error) {
	cost, err := r.httpCost(h)
	if err != nil {
		return Check{}, err
	}
	id, ok, err := r.httpIdentity(h, peer, v)
	if err != nil {
		return Check{}, err
	}
	rid, err := r.httpRequestID(h)
	if err != nil {
		return Check{}, err
	}
	return Check{Identity: id, HasIdentity: ok, Cost: cost, RequestID: rid}, nil
}

// DescriptorCheck is r's check of one Envoy descriptor of domain: identity and request id
// from its entries, and the cost the caller stated (0 means the policy's default).
func (r *Rule) DescriptorCheck(domain string, entries []DescriptorEntry, stated int64) (Check, error) {
	cost, err := r.StatedCost(stated)
	if err != nil {
		return Check{}, err
	}
	id, ok := r.descriptorIdentity(entries)
	c := Check{Identity: id, HasIdentity: ok, Cost: cost, RequestID: r.descriptorRequestID(entries)}
	if c.Tier, err = r.descriptorTier(&c, entries); err != nil {
		return Check{}, err
	}
	if c.RequestID != "" {
		c.Fingerprint = descriptorFingerprint(domain, entries)
	}
	return c, nil
}

// readHeader is how the limiter reads one request header: its value and whether it is
// present, or ErrRepeatedHeader when it has several field lines. Lists that are meant to be
// split across lines (X-Forwarded-For) are read with ForwardedFor instead.
func readHeader(h http.Header, name string) (value string, present bool, err error) {
	switch vs := h.Values(name); len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	default:
		return "", true, fmt.Errorf("header %s: %w", name, ErrRepeatedHeader)
	}
}
