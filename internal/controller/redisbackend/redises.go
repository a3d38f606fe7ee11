package redisbackend

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
)

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
	reader     client.Reader // nil without RedisBackends
	def        *Redis
	cfg        *Config // nil: RedisBackends off
	scripts    NewScripts
	configMaps client.Reader        // lists the snapshot ConfigMaps a script reload is reported on
	recorder   events.EventRecorder // reports script reloads
	keyPrefix  string
	elected    <-chan struct{}
	log        logr.Logger

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
