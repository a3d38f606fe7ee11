package controller

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Setup registers the script loader, the snapshot controller and the policy controller.
func Setup(mgr ctrl.Manager, rdb redis.UniversalClient, topo redisconn.Topology, resync time.Duration) error {
	loader := &ScriptLoader{Client: rdb, Resync: resync, Log: mgr.GetLogger().WithName("scripts")}
	if err := mgr.Add(loader); err != nil {
		return fmt.Errorf("add script loader: %w", err)
	}
	snaps := &SnapshotReconciler{Client: mgr.GetClient(), Redis: snapshot.Redis{
		Mode: string(topo.Mode), Addrs: topo.Addrs, MasterName: topo.MasterName, DB: topo.DB}}
	if err := snaps.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("snapshot controller: %w", err)
	}
	policies := &PolicyReconciler{Client: mgr.GetClient(), Scripts: loader, Snapshots: snaps,
		Recorder: mgr.GetEventRecorder("ratelimit-operator")}
	if err := policies.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("policy controller: %w", err)
	}
	return nil
}
