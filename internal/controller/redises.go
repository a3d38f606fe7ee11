package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// BackendsConfig turns RedisBackends on: namespaces they select get a Redis of their own.
type BackendsConfig struct {
	// Monitor builds the Redis memory monitor of a backend's nodes (its KeyPrefix, Log and
	// OnChange are set for it); nil, or a nil result, runs none.
	Monitor func(nodes redisacl.Nodes) *redismemory.Monitor
	// Users, when set, keeps the per-namespace Redis users of the namespaces a backend
	// serves on its nodes (--redis-tenant-users).
	Users *BackendUsers
	// Refresh is how often each backend's Secrets are read again. Default DefaultRefresh.
	Refresh time.Duration
}

// BackendUsers are what a backend's per-namespace users need: tenancy.Setup's settings.
type BackendUsers struct {
	// Prefix begins each managed user name.
	Prefix string
	// Resync is how often every node's users are checked and repaired.
	Resync time.Duration
	// Unknown receives the namespaces of managed users found unasked: the channel
	// tenancy.Options.Unknown shares.
	Unknown chan event.GenericEvent
}

// DefaultRefresh is how often a RedisBackend's Secrets are read again: a rotated password
// of its administrative user reaches the manager's new connections within it.
const DefaultRefresh = time.Minute

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
	Scripts *ScriptLoader
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

// Route is which Redis serves a namespace.
type Route struct {
	// Backend is the serving RedisBackend's name; backend.Default for the default Redis.
	Backend string
	// Topology is how its sidecars reach that Redis.
	Topology redisconn.Topology
	// Redis is the connection; nil while a backend is not connected (Err says why).
	Redis *Redis
	// Err says why Redis is nil.
	Err error
}

// notConnected is the error of a route to a backend the manager does not reach.
func (rt Route) notConnected() error {
	err := rt.Err
	if err == nil {
		err = errors.New("not connected yet")
	}
	return fmt.Errorf("%w: %s: %w", ErrRedisUnavailable, backend.Describe(rt.Backend), err)
}

// Redises is every Redis the manager serves namespaces on: the default one, and with
// RedisBackends one per backend, each with its own client, nodes, script loader, memory
// monitor and per-namespace users. It says which serves a namespace (backend.Serving over
// the RedisBackends and the namespace's labels, both read from the cache).
//
// It is a manager Runnable on every replica: a backend's client and script loader run on
// each (the usage API serves on each), its memory monitor and user repairs on the leader
// only. A backend's goroutines are children of Start's context, started when the
// RedisBackend controller connects it and stopped when it changes or goes.
type Redises struct {
	reader    client.Reader // nil without RedisBackends
	def       *Redis
	cfg       BackendsConfig
	loader    func(name string, c redis.UniversalClient) *ScriptLoader
	keyPrefix string
	elected   <-chan struct{}
	log       logr.Logger

	started  chan struct{}
	policies chan event.GenericEvent // to the policy controller: a Redis's scripts or memory changed
	statuses chan event.GenericEvent // to the RedisBackend controller: the object names the backend

	mu       sync.Mutex
	ctx      context.Context
	backends map[string]*Redis
	problems map[string]error // why a backend is not connected
}

// enabled reports whether RedisBackends are on.
func (r *Redises) enabled() bool { return r != nil && r.reader != nil }

// Enabled reports whether RedisBackends are on: asked for, and served by the API server.
func (r *Redises) Enabled() bool { return r.enabled() }

// Route is which Redis serves namespace ns: the RedisBackend selecting it whose name sorts
// first, else the default Redis. The error is a failure to read the cache.
func (r *Redises) Route(ctx context.Context, ns string) (Route, error) {
	def := Route{Backend: backend.Default, Topology: r.def.Topology, Redis: r.def}
	if !r.enabled() {
		return def, nil
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.reader.Get(ctx, types.NamespacedName{Name: ns}, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return def, nil
		}
		return Route{}, fmt.Errorf("read namespace %s: %w", ns, err)
	}
	var list v1alpha1.RedisBackendList
	if err := r.reader.List(ctx, &list); err != nil {
		return Route{}, fmt.Errorf("list RedisBackends: %w", err)
	}
	name := backend.Serving(list.Items, meta.Labels)
	if name == backend.Default {
		return def, nil
	}
	for i := range list.Items {
		if list.Items[i].Name == name {
			return r.routeTo(name, backend.Topology(list.Items[i].Spec)), nil
		}
	}
	return def, nil // unreachable: Serving names a listed backend
}

// routeTo is the route to the backend named name, whose sidecars reach it by topo.
func (r *Redises) routeTo(name string, topo redisconn.Topology) Route {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := Route{Backend: name, Topology: topo, Redis: r.backends[name]}
	if rt.Redis == nil {
		rt.Err = r.problems[name]
	}
	return rt
}

// ClientFor is the client of the Redis serving namespace ns, and that Redis's name (the
// usage API's usageapi.Redises).
func (r *Redises) ClientFor(ctx context.Context, ns string) (string, redis.UniversalClient, error) {
	rt, err := r.Route(ctx, ns)
	if err != nil {
		return "", nil, err
	}
	if rt.Redis == nil {
		return rt.Backend, nil, rt.notConnected()
	}
	return rt.Backend, rt.Redis.Client, nil
}

// Serving implements tenancy.Redises.
func (r *Redises) Serving(ctx context.Context, ns string) (tenancy.Place, error) {
	rt, err := r.Route(ctx, ns)
	if err != nil {
		return tenancy.Place{}, err
	}
	return placeOf(rt), nil
}

// Named implements tenancy.Redises.
func (r *Redises) Named(ctx context.Context, name string) (tenancy.Place, bool, error) {
	if !r.enabled() {
		return tenancy.Place{}, false, nil
	}
	var b v1alpha1.RedisBackend
	if err := r.reader.Get(ctx, types.NamespacedName{Name: name}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return tenancy.Place{}, false, nil
		}
		return tenancy.Place{}, false, fmt.Errorf("get RedisBackend %s: %w", name, err)
	}
	return placeOf(r.routeTo(name, backend.Topology(b.Spec))), true, nil
}

// Wanted implements tenancy.Redises.
func (r *Redises) Wanted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.backends {
		if b.Users != nil {
			n += b.Users.Wanted()
		}
	}
	return n
}

// placeOf is rt as package tenancy sees it.
func placeOf(rt Route) tenancy.Place {
	p := tenancy.Place{Backend: rt.Backend, Topology: rt.Topology, Err: rt.Err}
	if rt.Redis != nil {
		p.Users = rt.Redis.Users
		if p.Users == nil && rt.Backend != backend.Default {
			p.Err = errors.New("per-namespace users are off for RedisBackends")
		}
	}
	return p
}

// PolicyEvents delivers an event whenever some Redis's scripts or memory assessment
// changed, or a backend connected or went: the policy controller re-evaluates its policies.
func (r *Redises) PolicyEvents() <-chan event.GenericEvent { return r.policies }

// notify tells both controllers that the Redis named name changed. Never blocks: one
// pending event per controller is enough for the policies (every policy is re-evaluated),
// and the RedisBackend controller looks again every Refresh anyway.
func (r *Redises) notify(name string) {
	ev := event.GenericEvent{Object: &v1alpha1.RedisBackend{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	select {
	case r.policies <- ev:
	default:
	}
	if name == backend.Default {
		return
	}
	select {
	case r.statuses <- ev:
	default:
	}
}

// Start implements manager.Runnable: it holds the backends' goroutines until ctx ends,
// then stops them and closes their connections.
func (r *Redises) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	close(r.started)
	go r.onElected(ctx)
	<-ctx.Done()
	r.mu.Lock()
	all := r.backends
	r.backends = map[string]*Redis{}
	r.mu.Unlock()
	for _, b := range all {
		r.stop(b)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica reaches the
// backends (their scripts, the usage API).
func (r *Redises) NeedLeaderElection() bool { return false }

// onElected has the status of every backend written once this replica leads.
func (r *Redises) onElected(ctx context.Context) {
	select {
	case <-r.elected:
	case <-ctx.Done():
		return
	}
	var list v1alpha1.RedisBackendList
	if err := r.reader.List(ctx, &list); err != nil {
		return
	}
	for i := range list.Items {
		select {
		case r.statuses <- event.GenericEvent{Object: &list.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}

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
	b.Scripts = r.loader(name, rdb)
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
