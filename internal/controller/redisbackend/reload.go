package redisbackend

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// reloaded reports a script repair on the Redis named name (Redis restarted or flushed its
// scripts) as one event per namespace it serves, on its snapshot ConfigMap, rather than one
// per policy.
func (r *Redises) reloaded(name string) func(context.Context, int) {
	return func(ctx context.Context, n int) {
		var list corev1.ConfigMapList
		if err := r.configMaps.List(ctx, &list); err != nil {
			return
		}
		for i := range list.Items {
			cm := &list.Items[i]
			if cm.Name != snapshot.ConfigMapName {
				continue
			}
			if rt, err := r.Route(ctx, cm.Namespace); err != nil || rt.Backend != name {
				continue
			}
			r.recorder.Eventf(cm, nil, corev1.EventTypeNormal, "ScriptsReloaded", "Reload",
				"%d limiter script(s) had gone missing from %s (restart or SCRIPT FLUSH) and were loaded again", n, backend.Describe(name))
		}
	}
}
