package proxy

import (
	"net/http/httputil"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// appendXForwarded sets X-Forwarded-Host and -Proto, and appends the peer address to the
// inbound X-Forwarded-For (as nginx's $proxy_add_x_forwarded_for does), where
// ProxyRequest.SetXForwarded alone would replace it. The rightmost entry is the peer the
// sidecar saw; the entries to its left are only as trustworthy as the proxies in front.
func appendXForwarded(pr *httputil.ProxyRequest) {
	prior := requestread.ForwardedHeader(pr.In.Header).Values("X-Forwarded-For")
	pr.SetXForwarded()
	if peer := pr.Out.Header.Get("X-Forwarded-For"); peer != "" && len(prior) > 0 {
		pr.Out.Header.Set("X-Forwarded-For", strings.Join(prior, ", ")+", "+peer)
	}
}
