package extauthz

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// httpRequest is the HTTP request h describes as the engine reads it, from peer src. A path
// the engine refuses is a *requestread.BadRequestError.
func httpRequest(h *authv3.AttributeContext_HttpRequest, src *authv3.AttributeContext_Peer) (*requestread.HTTPRequest, error) {
	path, query, err := requestread.ParseTarget(h.GetMethod(), h.GetPath())
	if err != nil {
		return nil, err
	}
	return &requestread.HTTPRequest{Method: h.GetMethod(), Host: h.GetHost(), Path: path, Query: query,
		Header: requestread.ForwardedHeader(header(h)), Peer: peer(src.GetAddress())}, nil
}

// header is the request's header as Go's HTTP server would present it: canonical names,
// one value per field line, without pseudo-headers nor Host (the host field carries it).
// header_map keeps repeated field lines apart; the headers map, used when Envoy sends no
// header_map, has them joined already.
func header(h *authv3.AttributeContext_HttpRequest) http.Header {
	if m := h.GetHeaderMap(); m != nil {
		out := make(http.Header, len(m.GetHeaders()))
		for _, hv := range m.GetHeaders() {
			addHeader(out, hv.GetKey(), headerValue(hv))
		}
		return out
	}
	out := make(http.Header, len(h.GetHeaders()))
	for k, v := range h.GetHeaders() {
		addHeader(out, k, v)
	}
	return out
}

// headerValue is hv's value: Envoy sets raw_value with encode_raw_headers, value otherwise.
func headerValue(hv *corev3.HeaderValue) string {
	if raw := hv.GetRawValue(); raw != nil {
		return string(raw)
	}
	return hv.GetValue()
}

// addHeader adds one field line to h, unless it is a pseudo-header or Host.
func addHeader(h http.Header, name, value string) {
	if name == "" || name[0] == ':' || strings.EqualFold(name, "Host") {
		return
	}
	h.Add(name, value)
}

// peer is the address of a socket address as host:port (host alone without a port), or ""
// for any other kind of address (a pipe, an internal listener).
func peer(a *corev3.Address) string {
	sa := a.GetSocketAddress()
	if sa == nil || sa.GetAddress() == "" {
		return ""
	}
	if port := sa.GetPortValue(); port != 0 {
		return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(port), 10))
	}
	return sa.GetAddress()
}
