package usageapi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// ErrNoSnapshot is the error of a namespace without a published snapshot (no policy).
var ErrNoSnapshot = errors.New("no policy snapshot in the namespace")

// Redises gives the client of the Redis holding a namespace's counters: the manager's
// default Redis, or the RedisBackend's that serves the namespace (redisbackend.Redises,
// in internal/controller/redisbackend).
type Redises interface {
	// ClientFor is the client of the Redis serving namespace ns, and that Redis's name.
	ClientFor(ctx context.Context, ns string) (name string, c redis.UniversalClient, err error)
}

// Limiters are the usage API's limiters, one per Redis: built when a namespace on that
// Redis is first read, and again when its client changes (a RedisBackend edited). Safe for
// concurrent use.
type Limiters struct {
	redises Redises
	opts    limiter.Options

	mu sync.Mutex
	by map[string]redisLimiter // by Redis name
}

// redisLimiter is a limiter and the client it asks.
type redisLimiter struct {
	client redis.UniversalClient
	lim    *limiter.Limiter
}

// NewLimiters makes limiters with opts over the Redises r.
func NewLimiters(r Redises, opts limiter.Options) *Limiters {
	return &Limiters{redises: r, opts: opts, by: map[string]redisLimiter{}}
}

// forNamespace is the limiter on the Redis serving namespace ns.
func (l *Limiters) forNamespace(ctx context.Context, ns string) (*limiter.Limiter, error) {
	name, c, err := l.redises.ClientFor(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("redis of %s: %w", ns, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.by[name]
	if ok && cur.client == c {
		return cur.lim, nil
	}
	lim, err := limiter.New(c, l.opts)
	if err != nil {
		return nil, fmt.Errorf("limiter of %s: %w", ns, err)
	}
	if ok {
		cur.lim.Close() // its client was replaced
	}
	l.by[name] = redisLimiter{client: c, lim: lim}
	return lim, nil
}

// Close releases every limiter.
func (l *Limiters) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, cur := range l.by {
		cur.lim.Close()
		delete(l.by, name)
	}
}

// engines holds one engine per namespace read, on the snapshot its sidecars enforce: the
// one published in its ConfigMap. An engine is rebuilt only when that ConfigMap changes;
// its limiter is the one of the Redis serving the namespace now.
type engines struct {
	reader   client.Reader
	limiters *Limiters

	mu sync.Mutex
	by map[string]*nsEngine
}

// nsEngine is one namespace's engine and the ConfigMap version it was loaded from.
type nsEngine struct {
	resourceVersion string
	engine          *engine.Engine
}

// forNamespace is ns's engine on its current snapshot, or ErrNoSnapshot.
func (e *engines) forNamespace(ctx context.Context, ns string) (*engine.Engine, error) {
	var cm corev1.ConfigMap
	err := e.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: snapshot.ConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, ErrNoSnapshot
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot of %s: %w", ns, err)
	}
	lim, err := e.limiters.forNamespace(ctx, ns)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.by[ns]; ok && cur.resourceVersion == cm.ResourceVersion {
		cur.engine.SetLimiter(lim)
		return cur.engine, nil
	}
	g := &engine.Engine{Store: &engine.Store{Namespace: ns}}
	if err := g.Store.Load([]byte(cm.Data[snapshot.DataKey]), "configmap "+ns+"/"+snapshot.ConfigMapName); err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", ns, err)
	}
	g.SetLimiter(lim)
	if e.by == nil {
		e.by = map[string]*nsEngine{}
	}
	e.by[ns] = &nsEngine{resourceVersion: cm.ResourceVersion, engine: g}
	return g, nil
}
