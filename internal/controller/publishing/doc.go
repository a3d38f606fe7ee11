// Package publishing is the snapshot publisher: for each namespace with policies it builds
// the snapshot its sidecars enforce (SnapshotOf: every policy compiled, the matches
// attached policies' targets give them, the namespace's overrides, the Redis serving it)
// and writes it as the ConfigMap ratelimit-snapshot, coalescing a burst of changes into
// one write per round (Reconciler). Publications records what each namespace's ConfigMap
// holds, for the RateLimitPolicy reconciler to report Published and the RateLimitOverride
// reconciler to report each override's verdict. Compiler compiles each policy once per
// generation for both this publisher and the RateLimitPolicy reconciler.
//
// It writes no status: the reconcilers of the kinds do. How a policy compiles is
// internal/policy's; the document's form is internal/snapshot's.
package publishing
