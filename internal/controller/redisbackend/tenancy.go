package redisbackend

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/tenancy"
)

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
