// Package redisbackend holds every Redis the manager serves namespaces on: the default one
// (the --redis-* flags) and, with RedisBackends, one per backend, each with its client,
// script loader, memory monitor and per-namespace users (Redises). Route says which Redis
// serves a namespace. The Reconciler keeps each RedisBackend connected (its Secrets read
// every Refresh) and reports its status; the memory monitors' metrics are exported here.
//
// Which backend selects a namespace, and a backend's spec as connection options, are
// decided in internal/backend; the script loader itself is package controller's, and the
// per-namespace users' controller is package tenancy.
package redisbackend
