package source

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// ConfigMap feeds the snapshot ConfigMap of one namespace into a Sink, straight from the
// API server, without a volume mount. It runs an informer restricted to that namespace and to
// the one ConfigMap name (a metadata.name field selector), so the sidecar's service account
// needs only get, list and watch on configmaps in its own namespace (a Role, not a
// ClusterRole).
//
// On add and update the ConfigMap's snapshot.json key is handed to the sink when its bytes
// changed (a refused document is not offered again until it changes). An absent ConfigMap
// (none after the first list, or deleted: the controller deletes it with the namespace's last
// policy) means no policy applies: a Sink that is a Clearer is cleared.
type ConfigMap struct {
	// Client reaches the API server.
	Client kubernetes.Interface
	// Namespace holds the ConfigMap; it is required (the watch is namespace-scoped).
	Namespace string
	// Name of the ConfigMap; empty means snapshot.ConfigMapName.
	Name string
	// Sink receives the documents.
	Sink Sink
	// Log receives progress and errors; the informer logs through it too.
	Log logr.Logger
	// OnError, when set, is called with every load error, malformed ConfigMap and watch error.
	OnError func(error)
}

// Run watches the ConfigMap until ctx is done, then stops the informer and returns nil. It
// returns an error only when it cannot start (no Client, Namespace or Sink).
func (s *ConfigMap) Run(ctx context.Context) error {
	if s.Client == nil || s.Namespace == "" || s.Sink == nil {
		return errors.New("configmap snapshot source: Client, Namespace and Sink are required")
	}
	h := &watchHandler{
		namespace: s.Namespace,
		name:      s.name(),
		log:       s.Log,
		feed:      &feeder{sink: s.Sink, log: s.Log, onError: s.OnError},
	}
	factory := s.factory(h.name)
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(h.handlers()); err != nil {
		return fmt.Errorf("configmap snapshot source: add event handler: %w", err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(h.watchError); err != nil {
		return fmt.Errorf("configmap snapshot source: set watch error handler: %w", err)
	}
	ctx = logr.NewContext(ctx, s.Log)
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	if res := factory.WaitForCacheSyncWithContext(ctx); res.Err == nil {
		s.Log.Info("watching snapshot configmap", "namespace", h.namespace, "name", h.name)
		if _, exists, err := inf.GetStore().GetByKey(h.namespace + "/" + h.name); err == nil && !exists {
			h.feed.clear(fmt.Sprintf("configmap %s/%s absent", h.namespace, h.name))
		}
	}
	<-ctx.Done()
	return nil
}

func (s *ConfigMap) name() string {
	if s.Name == "" {
		return snapshot.ConfigMapName
	}
	return s.Name
}

// factory builds an informer factory that lists and watches only the named ConfigMap of the
// source's namespace, with no periodic resync (the watch delivers every change).
func (s *ConfigMap) factory(name string) informers.SharedInformerFactory {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	return informers.NewSharedInformerFactoryWithOptions(s.Client, 0,
		informers.WithNamespace(s.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }),
	)
}

// watchHandler turns informer notifications about the snapshot ConfigMap into sink loads.
type watchHandler struct {
	namespace, name string
	log             logr.Logger
	feed            *feeder
}

func (h *watchHandler) handlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    h.apply,
		UpdateFunc: func(_, obj any) { h.apply(obj) },
		DeleteFunc: h.deleted,
	}
}

// apply offers the ConfigMap's document. The name is checked again in case a client ignores
// field selectors.
func (h *watchHandler) apply(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Name != h.name {
		return
	}
	origin := fmt.Sprintf("configmap %s/%s@%s", cm.Namespace, cm.Name, cm.ResourceVersion)
	data, ok := cm.Data[snapshot.DataKey]
	if !ok {
		h.feed.fail(fmt.Errorf("%s has no %q key: refused", origin, snapshot.DataKey),
			"refused snapshot configmap; keeping the last good snapshot", "origin", origin)
		return
	}
	h.feed.offer([]byte(data), origin)
}

// deleted tells the sink the namespace has no snapshot any more: the controller deletes the
// ConfigMap with the namespace's last policy, so no policy applies.
func (h *watchHandler) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != h.name {
		return
	}
	h.log.Info("snapshot configmap deleted: no policy applies", "namespace", h.namespace, "name", h.name)
	h.feed.clear(fmt.Sprintf("configmap %s/%s deleted", h.namespace, h.name))
}

// watchError reports list and watch failures (e.g. RBAC forbidding the list) and leaves the
// routine ones (expired resource version, closed watch) to client-go's default handler.
func (h *watchHandler) watchError(ctx context.Context, r *cache.Reflector, err error) {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		return
	}
	h.feed.fail(fmt.Errorf("watch configmap %s/%s: %w", h.namespace, h.name, err),
		"snapshot configmap watch failed; retrying", "namespace", h.namespace, "name", h.name)
}
