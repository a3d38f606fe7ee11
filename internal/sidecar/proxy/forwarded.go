package proxy

import (
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strings"
)

// hopByHop are the headers a proxy never forwards (RFC 9110 section 7.6.1), as
// net/http/httputil drops them.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forwardedHeader is h as the upstream will receive it from the reverse proxy: without the
// hop-by-hop headers, nor those the Connection header names. The limiter must read this
// view: a header it read but the upstream never sees lets a client choose its identity
// freely, or reuse one Idempotency-Key for requests the upstream cannot recognise as retries.
// h itself is returned, not copied, when it has none of them.
func forwardedHeader(h http.Header) http.Header {
	var drop []string
	for _, name := range hopByHop {
		if _, ok := h[name]; ok {
			drop = append(drop, name)
		}
	}
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				drop = append(drop, name)
			}
		}
	}
	if len(drop) == 0 {
		return h
	}
	out := h.Clone()
	for _, name := range drop {
		out.Del(name)
	}
	return out
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
