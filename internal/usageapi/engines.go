package usageapi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// ErrNoSnapshot is the error of a namespace without a published snapshot (no policy).
var ErrNoSnapshot = errors.New("no policy snapshot in the namespace")

// engines holds one engine per namespace read, on the snapshot its sidecars enforce: the
// one published in its ConfigMap. An engine is rebuilt only when that ConfigMap changes.
type engines struct {
	reader  client.Reader
	limiter *limiter.Limiter

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
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.by[ns]; ok && cur.resourceVersion == cm.ResourceVersion {
		return cur.engine, nil
	}
	g := &engine.Engine{Store: &engine.Store{Namespace: ns}}
	if err := g.Store.Load([]byte(cm.Data[snapshot.DataKey]), "configmap "+ns+"/"+snapshot.ConfigMapName); err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", ns, err)
	}
	g.SetLimiter(e.limiter)
	if e.by == nil {
		e.by = map[string]*nsEngine{}
	}
	e.by[ns] = &nsEngine{resourceVersion: cm.ResourceVersion, engine: g}
	return g, nil
}
