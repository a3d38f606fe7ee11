package redisbackend

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// Config turns RedisBackends on: namespaces they select get a Redis of their own.
type Config struct {
	// Monitor builds the Redis memory monitor of a backend's nodes (its KeyPrefix, Log and
	// OnChange are set for it); nil, or a nil result, runs none.
	Monitor func(nodes redisacl.Nodes) *redismemory.Monitor
	// Users, when set, keeps the per-namespace Redis users of the namespaces a backend
	// serves on its nodes (--redis-tenant-users).
	Users *Users
	// Refresh is how often each backend's Secrets are read again. Default DefaultRefresh.
	Refresh time.Duration
}

// Users are what a backend's per-namespace users need: tenancy.Setup's settings.
type Users struct {
	// Prefix begins each managed user name.
	Prefix string
	// Resync is how often every node's users are checked and repaired.
	Resync time.Duration
	// Unknown receives the namespaces of managed users found unasked: the channel
	// tenancy.Options.Unknown shares.
	Unknown chan event.GenericEvent
}

// Retry is how long a controller waits to look again at a Redis it could not reach: a
// policy re-checks its scripts, a RedisBackend reconnects.
const Retry = 5 * time.Second

// DefaultRefresh is how often a RedisBackend's Secrets are read again: a rotated password
// of its administrative user reaches the manager's new connections within it.
const DefaultRefresh = time.Minute
