package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// Redis is one Redis deployment the manager serves namespaces on: the default one (the
// --redis-* flags) or a RedisBackend's.
type Redis struct {
	// Name is the RedisBackend's name; backend.Default ("") is the default Redis.
	Name string
	// Topology is how sidecars reach it (published in snapshots, never credentials).
	Topology redisconn.Topology
	// Client reaches it as the manager's (administrative) user.
	Client redis.UniversalClient
	// Scripts keeps the limiter's scripts loaded on every primary.
	Scripts Scripts
	// Memory watches its memory settings and keys; nil when the checks are off.
	Memory *redismemory.Monitor
	// Users keeps the per-namespace users of the namespaces it serves; nil without them
	// (and for the default Redis, whose users package tenancy keeps).
	Users *redisacl.Users

	key        string // what the connection was built from; another rebuilds it
	creds      credentials
	closeNodes func() error
	cancel     context.CancelFunc
	running    sync.WaitGroup

	mu        sync.Mutex
	usersDone bool // a repair round finished
	usersErr  error
}

// credentials holds a backend's AUTH user and password, read from its Secret; new
// connections read them, so a rotated password needs no new client.
type credentials struct{ v atomic.Pointer[[2]string] }

func (c *credentials) set(user, password string) { c.v.Store(&[2]string{user, password}) }

func (c *credentials) provide(context.Context) (string, string, error) {
	v := c.v.Load()
	if v == nil {
		return "", "", errors.New("no redis credentials read yet")
	}
	return v[0], v[1], nil
}

// pingTimeout bounds the RedisBackend controller's question whether Redis answers.
const pingTimeout = 2 * time.Second

// ping asks b's Redis whether it answers: TIME, which the administrative user of
// config/redis/acl.conf (and every limiter user) may run, unlike PING.
func (b *Redis) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := b.Client.Time(ctx).Err(); err != nil {
		return fmt.Errorf("TIME: %w", err)
	}
	return nil
}

// users is the outcome of b's last user repair round: done false before the first.
func (b *Redis) users() (done bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usersDone, b.usersErr
}
