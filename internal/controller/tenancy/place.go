package tenancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// Place is one Redis deployment that namespaces' users live on: the manager's default
// Redis or a RedisBackend's.
type Place struct {
	// Backend is the RedisBackend's name; backend.Default ("") is the default Redis.
	Backend string
	// Users keeps the users on its nodes; nil while the manager does not reach it (Err
	// says why).
	Users *redisacl.Users
	// Topology is the Redis as sidecars reach it: Cluster and a database other than 0 add
	// commands to the users.
	Topology redisconn.Topology
	// Err says why Users is nil.
	Err error
}

// Redises says which Redis serves each namespace when RedisBackends give some a Redis of
// their own (redisbackend.Redises, the registry of Redises, implements it).
type Redises interface {
	// Serving is the Redis serving namespace ns now. A Place whose Backend is
	// backend.Default is the default Redis: the Reconciler keeps its users itself.
	Serving(ctx context.Context, ns string) (Place, error)
	// Named is the Redis of the RedisBackend named name; false when there is none (it was
	// deleted: the manager no longer reaches its Redis).
	Named(ctx context.Context, name string) (Place, bool, error)
	// Wanted is how many users the RedisBackends' Redises keep, the default's not counted.
	Wanted() int
}

// errNotReached is the error of a Redis the manager does not reach now, without a reason.
var errNotReached = errors.New("not connected")

// defaultPlace is the default Redis, whose users this Reconciler keeps.
func (r *Reconciler) defaultPlace() Place {
	return Place{Backend: backend.Default, Users: r.Users, Topology: r.Topology}
}

// serving is the Redis serving ns: the default one without RedisBackends.
func (r *Reconciler) serving(ctx context.Context, ns string) (Place, error) {
	if r.Redises == nil {
		return r.defaultPlace(), nil
	}
	p, err := r.Redises.Serving(ctx, ns)
	if err != nil {
		return Place{}, fmt.Errorf("which Redis serves %s: %w", ns, err)
	}
	if p.Backend == backend.Default {
		return r.defaultPlace(), nil
	}
	return p, nil
}

// named is the Redis named name; false when there is no such RedisBackend any more.
func (r *Reconciler) named(ctx context.Context, name string) (Place, bool, error) {
	if name == backend.Default {
		return r.defaultPlace(), true, nil
	}
	if r.Redises == nil {
		return Place{}, false, nil
	}
	p, ok, err := r.Redises.Named(ctx, name)
	if err != nil {
		return Place{}, false, fmt.Errorf("read %s: %w", backend.Describe(name), err)
	}
	return p, ok, nil
}

// users are the place's users, or why the manager cannot reach them.
func (p Place) users() (*redisacl.Users, error) {
	if p.Users != nil {
		return p.Users, nil
	}
	err := p.Err
	if err == nil {
		err = errNotReached
	}
	return nil, fmt.Errorf("%s: %w", backend.Describe(p.Backend), err)
}

// wanted is how many users every Redis keeps.
func (r *Reconciler) wanted() int {
	n := r.Users.Wanted()
	if r.Redises != nil {
		n += r.Redises.Wanted()
	}
	return n
}

// follow records in want that the namespace's user lives on place, and retires it from
// the Redis it left: kept there, accepting the current passwords, for Grace (sidecars reach
// that Redis until the kubelet refreshes their snapshot), then deleted. st is the state the
// Secret held before. A second move within the grace deletes the user from the first Redis
// at once, unless it moves back there: then the user stays, and is retired from the Redis
// it left instead.
func (r *Reconciler) follow(ctx context.Context, ns string, want *corev1.Secret, st tenantState, place Place, now time.Time) error {
	if st.backend != place.Backend {
		if st.leaving && st.left != place.Backend && st.left != st.backend {
			if err := r.deleteFrom(ctx, st.left, ns); err != nil {
				return err
			}
		}
		setBackend(want, place.Backend) // a retirement from place itself (moved back) ends here
		want.Annotations[AnnotationLeftBackend] = st.backend
		want.Annotations[AnnotationLeftDeleteAfter] = formatTime(now.Add(r.Grace))
		logf.FromContext(ctx).Info("redis user follows its namespace to another Redis", "namespace", ns,
			"user", r.userName(ns), "from", backend.Describe(st.backend), "to", backend.Describe(place.Backend))
		r.event(want, corev1.EventTypeNormal, "RedisUserMoved",
			"Redis user %s now lives on %s; it stays on %s for %s (sidecars not yet given the new snapshot still reach it), then is deleted there",
			r.userName(ns), backend.Describe(place.Backend), backend.Describe(st.backend), r.Grace)
	} else if st.leaving && st.left == place.Backend {
		forgetLeft(want) // hand-edited: the user lives where it is said to be leaving
	}
	st = readTenantState(want)
	if !st.leaving {
		return nil
	}
	if now.Before(st.leftDeleteAfter) {
		return r.applyOn(ctx, st.left, ns, st.hashes(now))
	}
	if err := r.deleteFrom(ctx, st.left, ns); err != nil {
		return err
	}
	forgetLeft(want)
	logf.FromContext(ctx).Info("redis user deleted from the Redis its namespace left", "namespace", ns,
		"user", r.userName(ns), "redis", backend.Describe(st.left))
	return nil
}

// applyOn sets the namespace's user, accepting exactly hashes, on every node of the Redis
// named name; nothing when that RedisBackend is gone.
func (r *Reconciler) applyOn(ctx context.Context, name, ns string, hashes []string) error {
	p, ok, err := r.named(ctx, name)
	if err != nil || !ok {
		return err
	}
	return r.apply(ctx, p, ns, hashes)
}

// deleteFrom deletes the namespace's user from every node of the Redis named name; nothing
// when that RedisBackend is gone (the manager no longer reaches its Redis).
func (r *Reconciler) deleteFrom(ctx context.Context, name, ns string) error {
	p, ok, err := r.named(ctx, name)
	if err != nil || !ok {
		return err
	}
	users, err := p.users()
	if err != nil {
		return err
	}
	return users.Delete(ctx, r.userName(ns))
}

// setBackend records that the user lives on the Redis of the RedisBackend named name; no
// annotation for the default Redis.
func setBackend(s *corev1.Secret, name string) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if name == backend.Default {
		delete(s.Annotations, AnnotationBackend)
		return
	}
	s.Annotations[AnnotationBackend] = name
}

// forgetLeft drops the retirement of the user from a Redis its namespace left.
func forgetLeft(s *corev1.Secret) {
	delete(s.Annotations, AnnotationLeftBackend)
	delete(s.Annotations, AnnotationLeftDeleteAfter)
}
