package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/app"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/source"
)

// check validates the flags, naming the one to fix.
func (o *options) check() (*url.URL, error) {
	if err := o.http.Validate(); err != nil {
		return nil, fmt.Errorf("--http-*: %w", err)
	}
	if (o.snapshotFile == "") == !o.snapshotWatch {
		return nil, errors.New("--snapshot-file or --snapshot-watch: exactly one snapshot source is required")
	}
	if o.snapshotWatch && o.namespace == "" {
		return nil, errors.New("--namespace: required with --snapshot-watch (or set $POD_NAMESPACE)")
	}
	if o.upstream == "" {
		return nil, nil
	}
	u, err := url.Parse(o.upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--upstream: %q is not an http(s) URL", o.upstream)
	}
	return u, nil
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("sidecar")
	upstream, err := o.check()
	if err != nil {
		return err
	}
	app.SetGCPercent(o.gcPercent)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := engine.NewMetrics(reg)
	store := &engine.Store{Namespace: o.namespace, Log: log.WithName("snapshot"), Metrics: metrics}
	health := &app.Health{Store: store, Log: log.WithName("health")}
	g, gctx := errgroup.WithContext(ctx)
	srv := &servers{log: log, grace: o.shutdownGrace, limits: o.http}
	if err := srv.listenAdmin(o.metricsAddr, reg, health, o.pprof); err != nil {
		return err
	}
	g.Go(func() error { return runSource(gctx, o, store, log) })
	g.Go(func() error { return serve(gctx, o, upstream, store, metrics, health, srv, log) })
	return g.Wait()
}

// serve starts the fronts, connects to Redis (waiting for a snapshot that names it when no
// --redis-addrs was given), and drains the fronts when ctx ends.
func serve(ctx context.Context, o options, upstream *url.URL, store *engine.Store, metrics *engine.Metrics,
	health *app.Health, srv *servers, log logr.Logger) error {
	defer srv.closeAdmin()
	eng := &engine.Engine{Store: store, Metrics: metrics}
	metrics.CountPipelines(eng)
	if err := srv.listenFronts(o, upstream, eng); err != nil {
		srv.stop(context.Background())
		return err
	}
	go health.WaitForRedis(ctx, time.Second)
	rdb, err := redisClient(ctx, o.redis, store, log)
	if err != nil {
		srv.stop(context.Background())
		return err
	}
	if rdb != nil {
		defer func() { _ = rdb.Close() }() // shutting down; nothing to do about a close error
		lim, err := limiter.New(rdb, limiter.Options{Timeout: o.timeout, Pipelining: o.pipelining, DenyCacheSize: o.denyCache})
		if err != nil {
			srv.stop(context.Background())
			return fmt.Errorf("limiter: %w", err)
		}
		defer lim.Close()
		eng.SetLimiter(lim)
		health.SetPing(func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	}
	<-ctx.Done()
	health.Drain()
	log.Info("draining", "delay", o.drainDelay)
	time.Sleep(o.drainDelay)
	srv.stop(context.Background())
	return nil
}

// redisClient builds the client from the --redis flags, or, without --redis-addrs, from the
// topology of the first good snapshot. nil without error means ctx ended first.
func redisClient(ctx context.Context, ro redisconn.Options, store *engine.Store, log logr.Logger) (redis.UniversalClient, error) {
	if len(ro.Addrs) == 0 {
		set, ok := waitForSnapshot(ctx, store)
		if !ok {
			return nil, nil
		}
		ro.Mode, ro.Addrs = redisconn.Mode(set.Redis.Mode), set.Redis.Addrs
		ro.MasterName, ro.DB = set.Redis.MasterName, set.Redis.DB
		ro.TLS.Enabled = ro.TLS.Enabled || set.Redis.TLS
		log.Info("redis topology from the snapshot", "mode", ro.Mode, "addrs", ro.Addrs, "tls", ro.TLS.Enabled)
	}
	if err := ro.Validate(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	rdb, err := redisconn.NewClient(ro)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return rdb, nil
}

// waitForSnapshot waits for a snapshot that names Redis (a namespace without policies has
// none; the sidecar serves meanwhile, every request passing unchecked).
func waitForSnapshot(ctx context.Context, store *engine.Store) (*engine.Set, bool) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if set := store.Current(); set != nil && len(set.Redis.Addrs) > 0 {
			return set, true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-t.C:
		}
	}
}

// runSource feeds the store from the mounted file or the ConfigMap watch until ctx ends.
func runSource(ctx context.Context, o options, store *engine.Store, log logr.Logger) error {
	if o.snapshotFile != "" {
		src := &source.File{Path: o.snapshotFile, Sink: store, Log: log.WithName("file")}
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
	src := &source.ConfigMap{Client: cs, Namespace: o.namespace, Sink: store, Log: log.WithName("watch")}
	return src.Run(ctx)
}
