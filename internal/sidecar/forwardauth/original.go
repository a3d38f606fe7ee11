package forwardauth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// Headers naming the original request.
const (
	headerForwardedMethod = "X-Forwarded-Method"
	headerForwardedURI    = "X-Forwarded-Uri"
	headerForwardedHost   = "X-Forwarded-Host"
	headerForwardedFor    = "X-Forwarded-For"
	headerOriginalURL     = "X-Original-URL"
	headerOriginalMethod  = "X-Original-Method"
)

// original is the client's request as the proxy states it: method, Host and request
// target (path and query).
type original struct {
	method, host, target string
}

// forwardAuthRequest reads the original request from Caddy's and Traefik's X-Forwarded-*
// headers.
func forwardAuthRequest(r *http.Request) (original, error) {
	h := r.Header
	var o original
	var err error
	if o.method, err = required(h, headerForwardedMethod); err != nil {
		return o, err
	}
	if o.target, err = required(h, headerForwardedURI); err != nil {
		return o, err
	}
	o.host, err = required(h, headerForwardedHost)
	return o, err
}

// authRequestRequest reads the original request from nginx's X-Original-URL
// (scheme://host/path?query) and X-Original-Method. A host query parameter of the auth
// request itself (routedHost) replaces X-Original-URL's host.
func authRequestRequest(r *http.Request) (original, error) {
	h := r.Header
	var o original
	var err error
	if o.method, err = required(h, headerOriginalMethod); err != nil {
		return o, err
	}
	raw, err := required(h, headerOriginalURL)
	if err != nil {
		return o, err
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (!strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https")) {
		return o, fmt.Errorf("header X-Original-URL: %q is not an absolute http(s) URL", raw)
	}
	o.host, o.target = rest, "/"
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		o.host, o.target = rest[:i], rest[i:]
		if o.target[0] == '?' {
			o.target = "/" + o.target
		}
	}
	routed, ok, err := routedHost(r.URL.RawQuery)
	switch {
	case err != nil:
		return o, err
	case ok:
		o.host = routed
	case o.host == "":
		return o, fmt.Errorf("header X-Original-URL: %q names no host", raw)
	}
	return o, nil
}

// routedHost is the host query parameter of an auth request, as sent (not decoded): the host
// the proxy routed the original request on, in the URL its configuration writes
// ("/v1/auth-request?host=$host"), where the client writes nothing. ingress-nginx fills
// X-Original-URL from the Host header ($http_host), while nginx routes a request whose target
// is absolute ("GET http://shop.example/ HTTP/1.1") by that target's host, whatever its
// Host header says. Empty or repeated is an error.
func routedHost(rawQuery string) (host string, ok bool, err error) {
	var found []string
	for field := range strings.SplitSeq(rawQuery, "&") {
		if v, isHost := strings.CutPrefix(field, "host="); isHost {
			found = append(found, v)
		}
	}
	switch {
	case len(found) == 0:
		return "", false, nil
	case len(found) > 1:
		return "", false, errors.New("query parameter host: sent more than once")
	case found[0] == "":
		return "", false, errors.New("query parameter host: empty (the proxy's $host)")
	default:
		return found[0], true, nil
	}
}

// required is the one value of header name: missing, empty or repeated is an error naming it.
func required(h http.Header, name string) (string, error) {
	switch vs := h.Values(name); {
	case len(vs) > 1:
		return "", fmt.Errorf("header %s: %w", name, requestread.ErrRepeatedHeader)
	case len(vs) == 0 || strings.TrimSpace(vs[0]) == "":
		return "", fmt.Errorf("header %s: required", name)
	default:
		return strings.TrimSpace(vs[0]), nil
	}
}

// originalHeader is the original request's header as the upstream receives it, and the
// client address the proxy saw. The proxy appended that address to X-Forwarded-For: it is
// the rightmost entry, and the entries to its left are the request's own X-Forwarded-For.
// The proxy's X-Forwarded-* and X-Original-* headers and the hop-by-hop headers are removed
// (the policies must not read what the upstream does not receive as the client sent it);
// h is not modified.
func originalHeader(h http.Header) (http.Header, string, error) {
	hops := requestread.ForwardedFor(h)
	if len(hops) == 0 {
		return nil, "", fmt.Errorf("header %s: required (the proxy appends the client's address to it)", headerForwardedFor)
	}
	peer := hops[len(hops)-1]
	if !isAddr(peer) {
		return nil, "", fmt.Errorf("header %s: the rightmost entry %q is not an address", headerForwardedFor, peer)
	}
	out := requestread.ForwardedHeader(h).Clone()
	for name := range out {
		if strings.HasPrefix(name, "X-Forwarded-") || strings.HasPrefix(name, "X-Original-") {
			delete(out, name)
		}
	}
	if len(hops) > 1 {
		out[headerForwardedFor] = []string{strings.Join(hops[:len(hops)-1], ", ")}
	}
	return out, peer, nil
}

// isAddr reports whether s is an IP address, optionally bracketed or with a port, as
// proxies write X-Forwarded-For entries.
func isAddr(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	_, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return err == nil
}
