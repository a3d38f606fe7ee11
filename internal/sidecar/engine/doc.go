// Package engine is the sidecar's core, shared by every front: it holds the snapshot in
// force (Store, Set), matches a request to the policies that govern it (Rule), builds each
// policy's Check (the caller's identity, the cost and the request id, which package
// requestread reads, and the tier), and decides through the limiter (Engine), recording
// metrics on the way.
//
// A Rule is one published policy (snapshot.Entry) compiled for the hot path: the limiter's
// compiled policy (limiter.Policy) bound to its matcher, tiers and overrides.
//
// The engine knows no front's wire format, and reads no header itself. A front turns its
// request into what requestread reads (a requestread.HTTPRequest for whole HTTP requests,
// requestread.DescriptorEntry lists for Envoy descriptors) or into a Check built from its
// own fields, and asks through package verdict, which turns the Outcomes into the one
// answer every front writes in its own form.
//
// While tracing is on (package tracing), Decide records a ratelimit.decide span per policy,
// child of the front's span in the context, and an EVALSHA span when Redis answered.
package engine
