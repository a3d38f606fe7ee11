// Package envoyrls is the sidecar's Envoy RLS v3 front: the gRPC RateLimitService that Envoy
// (or Istio) asks through its ratelimit filter. It maps each request onto the engine and the
// engine's outcomes back onto RLS statuses and headers.
//
// # Envoy RLS mapping
//
// A ShouldRateLimit request carries a domain and descriptors, each a list of key/value
// entries. Every descriptor is matched on its own against the policies whose match.envoy.domain
// equals the request's domain and whose match.envoy.descriptors entries are all present in the
// descriptor (an entry with a value must have that value). The identity comes from the first
// identity source that yields a value: Descriptor (the value of that entry in the same
// descriptor) or Fixed; Header, ClientIP and JWTClaim sources yield nothing on this front (use
// Envoy's request_headers or remote_address actions to put them in a descriptor). hits_addend
// is the cost (the request's 0 means the policy's default cost); a descriptor's own
// hits_addend set to 0 is a peek: the descriptor is decided at the policy's default cost and
// nothing is debited (no count, no lease, no idempotency record). A descriptor no policy matches is answered
// OK without a current_limit, as Envoy's reference service does; a descriptor that several
// policies match is checked against each, in name order, stopping at the first denial.
package envoyrls
