// Package backend decides which Redis serves a namespace, from the RedisBackends and the
// namespace's labels, and turns a RedisBackend's spec into the connection options of
// internal/redisconn. It is pure: no Kubernetes client, no Redis; the controllers read the
// objects and act on what it says.
//
// The rule: a namespace is served by the RedisBackend whose namespaceSelector selects it
// and whose name sorts first; the others that select it report a conflict naming it. A
// namespace no RedisBackend selects is served by the manager's default Redis (its --redis-*
// flags). An empty or unreadable selector selects nothing.
package backend
