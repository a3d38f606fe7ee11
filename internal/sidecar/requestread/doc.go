// Package requestread reads a request as the limiter sees it, for one published policy
// (snapshot.Entry) at a time: the host, canonical (CanonicalHost); each header the limiter
// reads, once, as the upstream receives it (Header, ForwardedHeader, ForwardedFor); the
// method and the methods the request asks the upstream to run instead (MethodOverrides);
// the caller's identity from the policy's sources, or the composite of its parts
// (HTTPIdentity, DescriptorIdentity, StatedParts); the cost (HTTPCost, StatedCost); the
// request id and the fingerprint that binds it to its request. It reads a whole HTTP
// request (HTTPRequest, ParseTarget: the proxy, ext_authz and forward auth), an Envoy
// descriptor (DescriptorEntry), or what a trusted caller states (the check API).
//
// It decides nothing: which policies govern a request, the tier that applies and the
// answer are the engine's (package engine), which reads each policy it matched through
// this package. A request that cannot be read the same way by the limiter and the upstream
// (a header sent twice, a host or path they would read differently) is refused here, with
// the field at fault named.
package requestread
