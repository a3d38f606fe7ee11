package rls

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
)

// CheckRequest is an ext_authz Check request for one identity on route, shaped as Envoy
// sends it (encode_raw_headers): a GET of route+"/x?page=1" on Host, the identity in header
// UserHeader, a socket address as the source.
func CheckRequest(route, user string) *authv3.CheckRequest {
	path := route + "/x?page=1"
	raw := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "GET", Host: Host, Path: path, Scheme: "http", Protocol: "HTTP/1.1",
			HeaderMap: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				raw(":authority", Host), raw(":path", path), raw(":method", "GET"), raw(":scheme", "http"),
				raw("user-agent", "bench"), raw("accept", "*/*"), raw("x-user", user),
			}},
		}},
	}}
}

// CheckRequests are n Check requests on route, for the identities Identity(0) to Identity(n-1).
func CheckRequests(route string, n int) []*authv3.CheckRequest {
	reqs := make([]*authv3.CheckRequest, max(n, 1))
	for i := range reqs {
		reqs[i] = CheckRequest(route, Identity(i))
	}
	return reqs
}

// CheckOutcome classifies a Check response: denied, admitted by Redis (a RateLimit header
// for the response), or admitted without Redis (FailOpen reports no limit).
func CheckOutcome(resp *authv3.CheckResponse) load.Outcome {
	if codes.Code(resp.GetStatus().GetCode()) != codes.OK {
		return load.Denied
	}
	for _, h := range resp.GetOkResponse().GetResponseHeadersToAdd() {
		if h.GetHeader().GetKey() == ratelimitheaders.HeaderLimit {
			return load.Admitted
		}
	}
	return load.Fallback
}
