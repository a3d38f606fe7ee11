package redisbackend

import (
	"context"

	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Scripts keeps the limiter's scripts loaded on every primary of one Redis: the manager's
// script loader (loader.ScriptLoader). Each Redis has its own.
type Scripts interface {
	// Start checks and repairs the scripts periodically until ctx ends (manager.Runnable).
	Start(ctx context.Context) error
	// Ensure loads the scripts if they are not known loaded.
	Ensure(ctx context.Context) error
	// Loaded reports whether every script is known loaded on every primary, and the last
	// error.
	Loaded() (bool, error)
	// Changed delivers an event whenever the scripts' loaded state changes.
	Changed() chan event.GenericEvent
}

// NewScripts makes the script loader of the Redis named name (backend.Default for the
// default one), which c reaches; onReload is to be told that scripts known loaded had gone
// missing (a restart or SCRIPT FLUSH) and were loaded again.
type NewScripts func(name string, c redis.UniversalClient, onReload func(ctx context.Context, scripts int)) Scripts
