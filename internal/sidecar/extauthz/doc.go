// Package extauthz is the sidecar's Envoy ext_authz v3 front: the gRPC Authorization service
// that Envoy (or Istio, or any gateway built on Envoy) asks through its ext_authz HTTP filter
// before it forwards a request. It judges the whole HTTP request as the reverse proxy does
// (engine.DecideHTTP, front "extauthz") and answers with the RateLimit headers or a 429.
//
// # Mapping
//
// A CheckRequest's attributes.request.http becomes an requestread.HTTPRequest: method as sent;
// host from the host field (Envoy's :authority); the path field, which Envoy sends with its
// query, is read by requestread.ParseTarget into the normalized path and the raw query, so every
// spelling an upstream serves as one path is judged as that path. Headers come from
// header_map when Envoy sends it (encode_raw_headers: repeated field lines stay repeated, so
// a header the limiter reads that is sent twice refuses the request, requestread.ErrRepeatedHeader,
// as on the proxy), else from the headers map (Envoy has already joined repeated lines with
// commas there). Pseudo-headers (":path", ":authority", ...) and Host are never identity
// headers: they are dropped, as is every hop-by-hop header (requestread.ForwardedHeader). The peer
// is attributes.source.address's socket address (address and port); a ClientIP identity with
// trustedProxies reads X-Forwarded-For as on the proxy. The body is never read.
//
// The answers:
//
//   - Admitted, including a request no policy matches (no headers then), a missing identity
//     under onMissing Skip or Shared, a shadow policy's denial, and a Redis outage under
//     FailOpen or within LocalCap: status OK, and ok_response.response_headers_to_add carries
//     RateLimit-Policy and RateLimit, which Envoy sets on the upstream's response (replacing
//     the upstream's own, as the proxy does).
//   - Denied, by a limit, by onMissing Reject, or by a Redis outage under FailClosed or
//     beyond LocalCap: status PERMISSION_DENIED and denied_response 429 with RateLimit-Policy,
//     RateLimit, Retry-After (not for onMissing Reject, nor for a cost no wait can admit),
//     Content-Type text/plain and a one-line body naming the policy and why
//     (ratelimitheaders.Reason); never the caller's identity.
//   - A request that cannot be judged (a path upstreams read differently such as one with
//     %2F, a header the limiter reads sent twice, a cost out of bounds): status
//     INVALID_ARGUMENT and denied_response 400 with the reason as a text/plain body. Nothing
//     is debited.
//   - Before the first snapshot is loaded: the gRPC error Unavailable, so Envoy's own
//     failure_mode_allow setting of the ext_authz filter decides (true: forward the request;
//     false, Envoy's default: 403, or status_on_error).
//   - A CheckRequest without attributes.request.http (such as the network ext_authz filter's):
//     the gRPC error InvalidArgument.
//
// Redis outages are the policies' failure modes, applied by the engine as on every front.
// Denials are logged at V(1) with the policy, the limit and the source of the decision;
// never the identity, nor any header. Metrics are the engine's, with front="extauthz".
package extauthz
