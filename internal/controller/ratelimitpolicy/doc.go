// Package ratelimitpolicy is the RateLimitPolicy reconciler: it compiles each policy with
// the webhook's own rules (through the publisher's Compiler, once per generation), keeps
// its scripts loaded on the Redis serving its namespace, reports whether its namespace's
// snapshot holds it, and writes its status (Published, ScriptsLoaded, CountersProtected,
// Ready and Stalled, each with the generation; status.scripts, status.snapshot and, for a
// policy attached to Gateway API objects, status.ancestors), with an Event on each
// transition worth telling. A finalizer keeps a deleted policy until its snapshot no longer
// holds it.
//
// It writes no snapshot: the snapshot publisher (package publishing) is the only writer,
// and this reconciler reads what it published (publishing.PublishedView). Which traffic an
// attached policy governs is decided in internal/attachment and read through package
// gatewayapi, which also programs the gateways' data planes for it.
package ratelimitpolicy
