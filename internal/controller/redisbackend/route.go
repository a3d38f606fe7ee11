package redisbackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts/loader"
)

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

// ErrUnavailable wraps the error of a route to a Redis the manager does not reach: the
// script loader's own (loader.ErrRedisUnavailable), so a Redis not reached reads alike in
// every condition.
var ErrUnavailable = loader.ErrRedisUnavailable

// NotConnected is the error of a route to a backend the manager does not reach.
func (rt Route) NotConnected() error {
	err := rt.Err
	if err == nil {
		err = errors.New("not connected yet")
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, backend.Describe(rt.Backend), err)
}

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
		return rt.Backend, nil, rt.NotConnected()
	}
	return rt.Backend, rt.Redis.Client, nil
}
