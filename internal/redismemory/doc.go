// Package redismemory watches how the limiter's Redis spends and bounds its memory, which
// every tenant shares: Redis has no per-user memory quota. On every node (primaries and
// replicas: a replica's settings apply once it is promoted) it reads maxmemory,
// maxmemory-policy and maxmemory-clients (CONFIG GET) and INFO memory, stats and
// replication, and reports what they mean for the counters:
//
//   - CountersEvictable: a maxmemory-policy other than noeviction. Every limiter key has a
//     TTL, so the volatile-* policies evict counters as readily as the allkeys-* ones; an
//     evicted counter starts afresh and admits again (over-admission). With noeviction a
//     full Redis answers writes with OOM and the policy's failure mode decides.
//   - MemoryUnbounded: maxmemory 0. Redis grows until the kernel kills it.
//   - ClientMemoryUnbounded: maxmemory-clients 0 (or Redis older than 7.0). A client's
//     query and output buffers (a huge MGET's arguments, a large reply) are not evicted;
//     client-query-buffer-limit does not bound a multibulk's accumulated arguments.
//
// On every primary it also samples which namespace holds what, at a bounded cost: an
// incremental SCAN of ScanCount keys per ScanInterval, then MEMORY USAGE and PTTL of the
// keys returned, pipelined. Keys are attributed by their scope ("{<key prefix><namespace>/",
// keylayout.NamespaceOf). The limiter writes every key with a TTL, so a key without one in a
// namespace's scope was written by someone holding that namespace's Redis credentials (a
// "foreign key"). Totals are published per completed SCAN cycle of a primary. With tenant
// users, CLIENT LIST adds each namespace's connections and their buffer memory.
//
// Monitor is a manager Runnable; Assess turns its last report into what a RateLimitPolicy's
// CountersProtected condition says, and Monitor is a Prometheus collector of the findings,
// the settings and the per-namespace figures. The package has no Kubernetes imports.
package redismemory
