package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// connect makes the backend named name reach its Redis with o, as user and password: a
// new connection (client, nodes, loader, monitor, users) when key, what o was built from,
// differs from the current one's; else only the credentials are refreshed.
func (r *Redises) connect(ctx context.Context, name, key string, o redisconn.Options, user, password string) error {
	select {
	case <-r.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	cur := r.backends[name]
	if cur != nil && cur.key == key {
		cur.creds.set(user, password)
		_, failed := r.problems[name]
		delete(r.problems, name)
		r.mu.Unlock()
		if failed {
			r.notify(name)
		}
		return nil
	}
	r.mu.Unlock()
	b, err := r.build(name, key, o, user, password)
	if err != nil {
		r.fail(name, err)
		return err
	}
	r.mu.Lock()
	if r.ctx.Err() != nil { // shutting down: Start has stopped the others already
		r.mu.Unlock()
		_ = errors.Join(b.closeNodes(), b.Client.Close()) // never used
		return r.ctx.Err()
	}
	old := r.backends[name]
	r.backends[name] = b
	delete(r.problems, name)
	r.run(r.ctx, b)
	r.mu.Unlock()
	if old != nil {
		r.stop(old)
	}
	r.log.Info("connected to a RedisBackend", "backend", name, "mode", o.Mode, "addrs", o.Addrs, "tls", o.TLS.Enabled)
	r.notify(name)
	return nil
}

// build makes a backend's connection, not yet running.
func (r *Redises) build(name, key string, o redisconn.Options, user, password string) (*Redis, error) {
	b := &Redis{Name: name, Topology: o.Topology(), key: key}
	b.creds.set(user, password)
	if user != "" || password != "" {
		o.Credentials = b.creds.provide
	}
	rdb, err := redisconn.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("redis client: %w", err)
	}
	nodes, closeNodes, err := redisacl.NodesOf(rdb, o)
	if err != nil {
		_ = rdb.Close() // never used
		return nil, err
	}
	b.Client, b.closeNodes = rdb, closeNodes
	b.Scripts = r.scripts(name, rdb, r.reloaded(name))
	if r.cfg.Monitor != nil {
		if m := r.cfg.Monitor(nodes); m != nil {
			m.KeyPrefix, m.Log = r.keyPrefix, r.log.WithName("redis-memory").WithValues("backend", name)
			m.OnChange = func() { r.notify(name) }
			b.Memory = m
		}
	}
	if u := r.cfg.Users; u != nil {
		b.Users = &redisacl.Users{Nodes: nodes, Prefix: u.Prefix}
	}
	return b, nil
}

// run starts b's goroutines under ctx: its script loader, and once this replica leads its
// memory monitor and user repairs. ctx is r.ctx, which Start set before connect could get
// here; r.mu is held.
func (r *Redises) run(ctx context.Context, b *Redis) {
	ctx, b.cancel = context.WithCancel(ctx)
	b.running.Go(func() { _ = b.Scripts.Start(ctx) })
	b.running.Go(func() {
		for {
			select {
			case <-b.Scripts.Changed():
				r.notify(b.Name)
			case <-ctx.Done():
				return
			}
		}
	})
	b.running.Go(func() {
		select {
		case <-r.elected:
		case <-ctx.Done():
			return
		}
		var leader sync.WaitGroup
		if b.Memory != nil {
			memoryMetrics.addBackend(b.Name, b.Memory)
			leader.Go(func() { _ = b.Memory.Start(ctx) })
		}
		if b.Users != nil {
			leader.Go(func() { _ = r.repairer(b).Start(ctx) })
		}
		leader.Wait()
	})
}

// repairer is the user repair loop of b, reporting its rounds (UsersReady).
func (r *Redises) repairer(b *Redis) *tenancy.Repairer {
	u := r.cfg.Users
	return &tenancy.Repairer{Users: b.Users, UserPrefix: u.Prefix, Resync: u.Resync, Unknown: u.Unknown,
		Log: r.log.WithName("tenant-users").WithValues("backend", b.Name),
		OnRound: func(_ redisacl.RepairResult, err error) {
			b.mu.Lock()
			changed := !b.usersDone || (b.usersErr == nil) != (err == nil)
			b.usersDone, b.usersErr = true, err
			b.mu.Unlock()
			if changed {
				r.notify(b.Name)
			}
		}}
}

// stop ends b's goroutines and closes its connections.
func (r *Redises) stop(b *Redis) {
	b.cancel()
	b.running.Wait()
	memoryMetrics.removeBackend(b.Name, b.Memory)
	if err := errors.Join(b.closeNodes(), b.Client.Close()); err != nil {
		r.log.V(1).Info("closing a RedisBackend's connections", "backend", b.Name, "error", err.Error())
	}
}

// fail records why the backend named name cannot be (re)connected, and tells only when
// that changed (the RedisBackend controller retries on its own: telling it of the same
// failure again would have it read the Secret in a loop). A connection it already has
// stays: its last credentials keep serving, as a mounted Secret's do.
func (r *Redises) fail(name string, err error) {
	r.mu.Lock()
	prev, had := r.problems[name]
	r.problems[name] = err
	r.mu.Unlock()
	if !had || prev.Error() != err.Error() {
		r.notify(name)
	}
}

// disconnect stops and forgets the backend named name: it was deleted.
func (r *Redises) disconnect(name string) {
	r.mu.Lock()
	b := r.backends[name]
	delete(r.backends, name)
	delete(r.problems, name)
	r.mu.Unlock()
	if b == nil {
		return
	}
	r.stop(b)
	r.log.Info("disconnected from a deleted RedisBackend", "backend", name)
	r.notify(name)
}

// backendState is what a backend's status reports of its connection.
type backendState struct {
	redis   *Redis
	problem error
}

// state is the connection of the backend named name, or why there is none.
func (r *Redises) state(name string) backendState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return backendState{redis: r.backends[name], problem: r.problems[name]}
}
