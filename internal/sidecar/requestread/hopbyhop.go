package requestread

import (
	"net/http"
	"net/textproto"
	"strings"
)

// hopByHop are the headers a proxy never forwards (RFC 9110 section 7.6.1), as
// net/http/httputil drops them.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// ForwardedHeader is h as an upstream receives it through a proxy: without the hop-by-hop
// headers, nor those the Connection header names. Every front that judges whole HTTP
// requests hands the engine this view (HTTPRequest.Header): a header the limiter read but
// the upstream never sees lets a client choose its identity freely, or reuse one
// Idempotency-Key for requests the upstream cannot recognise as retries. h itself is
// returned, not copied, when it has none of them.
func ForwardedHeader(h http.Header) http.Header {
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
