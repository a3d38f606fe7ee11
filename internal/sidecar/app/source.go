package app

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/source"
)

// runSource feeds the store from the mounted file or the ConfigMap watch until ctx ends.
func (a *App) runSource(ctx context.Context) error {
	log := a.cfg.Log
	if a.cfg.SnapshotFile != "" {
		src := &source.File{Path: a.cfg.SnapshotFile, Sink: a.sink, Log: log.WithName("file")}
		return src.Run(ctx)
	}
	cfg, err := ctrl.GetConfig() // --kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	src := &source.ConfigMap{Client: cs, Namespace: a.cfg.Namespace, Sink: a.sink, Log: log.WithName("watch")}
	return src.Run(ctx)
}
