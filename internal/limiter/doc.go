// Package limiter decides admit-or-deny for rate limit policies, atomically inside Redis: one
// script call (internal/scripts) checks and debits every limit of a request, reading the
// Redis server clock, with every key declared in KEYS under one hash tag. It has no
// Kubernetes imports.
//
// The core is a Policy (policy.go: what a published entry compiles to, its keys and ARGV;
// Validate checks a Spec without building one), the table of what differs between the
// algorithms (algorithm.go), and a Limiter (limiter.go: Check) around one script call
// (eval.go, once.go, scripts.go), with what happens around that call: pipelining (batch.go;
// on a standalone or Sentinel Redis a pipeline's checks of one script share one call,
// shared.go), a circuit breaker for Redis
// (breaker.go) and one per Redis Cluster primary (primaries.go), failure modes and the
// decision they make (decision.go, errkind.go), a local cap for when Redis is away
// (localcap.go) and a cache of certain denials (denycache.go).
//
// Beside checks: peeks (peek.go), adjustments and settlements (adjust.go, settle.go),
// concurrency slots (concurrency.go), calendar windows (calendar.go).
//
// Two tiers for hot identities sit on that core and are used only by policies that ask for
// them (spec.hotKeys):
//
//   - the local tier, leases (localtier.go, lease*.go, hotfilter.go, hotidentities.go, the
//     lease scripts): an identity checked often at one sidecar takes a block of units in one
//     script call and spends it locally, never a unit Redis has not debited and its replicas
//     acknowledged. It reaches the core only through tierCore (tiercore.go), and the core
//     calls it only in Check: the arrows run one way;
//   - the global tier, shards (shards.go): one identity's budget split over several hash
//     tags, so its load spreads over Cluster primaries.
package limiter
