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
//
// # The end of a stream
//
// A policy whose cost settles from the response (cost.settle) or that limits requests in
// flight (concurrency) needs to hear when the request ended. Envoy says so with a second
// rate limit of the route marked apply_on_stream_done: its descriptor carries the same
// entries plus RequestIDKey (the x-request-id) and StreamDoneKey, and its hits_addend the
// cost the response stated. The stream-start call's admissions whose descriptor carries
// RequestIDKey are remembered (at most MaxPending, for an hour); the stream-end call
// settles each at its hits_addend (none: the reservation stands) and gives back its slot,
// debits nothing and answers OK. A request another descriptor denies is ended at once: it
// cost nothing and holds no slot. Without the stream-end call, reservations stand and
// slots expire after concurrency.slotTTL.
package envoyrls
