// Package limiter decides admit-or-deny for rate limit policies, atomically inside Redis: one
// Lua script per algorithm checks and debits every limit of a request in one call, reading the
// Redis server clock, with every key declared in KEYS under one hash tag. It has no
// Kubernetes imports.
//
// The core is a Policy (policy.go: what a published entry compiles to, its keys and ARGV)
// and a Limiter (limiter.go: Check) around one script call (eval.go, scripts.go, lua/), with
// what happens around that call: pipelining (batch.go), a circuit breaker for Redis
// (breaker.go) and one per Redis Cluster primary (primaries.go), failure modes and the
// decision they make (decision.go, errkind.go), a local cap for when Redis is away
// (localcap.go) and a cache of certain denials (denycache.go).
//
// Two tiers for hot identities sit on that core and are used only by policies that ask for
// them (spec.hotKeys):
//
//   - the local tier, leases (localtier.go, lease*.go, hotfilter.go, hotidentities.go,
//     lua/lease.lua): an identity checked often at one sidecar takes a block of units in one
//     script call and spends it locally, never a unit Redis has not debited and its replicas
//     acknowledged. It reaches the core only through tierCore (tiercore.go), and the core
//     calls it only in Check: the arrows run one way;
//   - the global tier, shards (shards.go): one identity's budget split over several hash
//     tags, so its load spreads over Cluster primaries.
package limiter
