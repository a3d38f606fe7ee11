package app

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
)

// Config is how the sidecar runs, but for its fronts (Run takes them).
type Config struct {
	// Namespace, when set, is the only namespace whose snapshot is accepted; the ConfigMap
	// watch requires it.
	Namespace string
	// SnapshotFile is the mounted snapshot file; empty means watching the snapshot ConfigMap
	// of Namespace through the API server.
	SnapshotFile string
	// MetricsAddr is where /metrics, /healthz and /readyz are served.
	MetricsAddr string
	// Pprof adds /debug/pprof to MetricsAddr.
	Pprof bool
	// HTTP bounds the admin listener.
	HTTP httpserver.Limits
	// Redis builds the Redis client. Without Addrs, the topology comes from the first
	// snapshot that names Redis.
	Redis redisconn.Options
	// Limiter are the limiter's settings (timeout, pipelining, deny cache).
	Limiter limiter.Options
	// DrainDelay is how long, on shutdown, the sidecar stays serving while unready, so
	// endpoints stop sending traffic.
	DrainDelay time.Duration
	// ShutdownGrace is the longest wait for the requests in flight on shutdown.
	ShutdownGrace time.Duration
	// Log receives the sidecar's logs.
	Log logr.Logger
}

// App is one sidecar: its engine, probes and metrics, ready to Run.
type App struct {
	// Engine decides for every front.
	Engine *engine.Engine

	cfg    Config
	store  *engine.Store
	sink   *loadSignal // the store as the snapshot sources feed it
	health *Health
	reg    *prometheus.Registry
}

// New builds the engine of cfg, with its metrics and probes. Its limiter is set by Run,
// once Redis is known.
func New(cfg Config) *App {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := engine.NewMetrics(reg)
	store := &engine.Store{Namespace: cfg.Namespace, Log: cfg.Log.WithName("snapshot"), Metrics: metrics}
	e := &engine.Engine{Store: store, Metrics: metrics}
	metrics.CountPipelines(e)
	return &App{Engine: e, cfg: cfg, store: store, sink: &loadSignal{Store: store}, reg: reg,
		health: &Health{Store: store, Log: cfg.Log.WithName("health")}}
}

// Run serves fronts, as the package documentation describes, until ctx ends; then it
// drains them and returns. It returns early with an error when a listener, the snapshot
// source or the Redis client cannot be set up.
func (a *App) Run(ctx context.Context, fronts ...Front) error {
	flushTraces := a.startTracing(ctx)
	defer flushTraces() // after the fronts drained: the last spans are ended
	srv := &servers{log: a.cfg.Log, grace: a.cfg.ShutdownGrace}
	if err := srv.listenAdmin(a.cfg.MetricsAddr, a.adminServer()); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.runSource(gctx) })
	g.Go(func() error { return a.serve(gctx, srv, fronts) })
	return g.Wait()
}

// serve starts the fronts, connects to Redis (waiting for a snapshot that names it when the
// options name none), and drains the fronts when ctx ends.
func (a *App) serve(ctx context.Context, srv *servers, fronts []Front) error {
	defer srv.closeAdmin()
	for _, f := range fronts {
		if err := srv.listen(f); err != nil {
			srv.stop(context.Background())
			return err
		}
	}
	go a.health.WaitForRedis(ctx, time.Second)
	conn, err := a.connect(ctx)
	if err != nil {
		srv.stop(context.Background())
		return err
	}
	if conn != nil {
		if len(a.cfg.Redis.Addrs) == 0 { // the topology is the snapshot's: follow it
			conn = a.follow(ctx, conn, a.sink.signal())
		}
		defer a.close(conn) // shutting down: after the fronts drained
	}
	<-ctx.Done()
	a.health.Drain()
	a.cfg.Log.Info("draining", "delay", a.cfg.DrainDelay)
	time.Sleep(a.cfg.DrainDelay)
	srv.stop(context.Background())
	return nil
}

// returnLeases gives back what the limiter's leases hold unspent as the sidecar stops, so a
// rollout does not strand units until their windows end.
func (a *App) returnLeases(lim *limiter.Limiter) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := lim.ReturnLeases(ctx); err != nil {
		a.cfg.Log.Error(err, "returning leases")
	}
}

// pprofTimeout is the least read and write timeout of the admin listener with pprof: a CPU
// profile (30s by default) or a trace answers only when it ends.
const pprofTimeout = 2 * time.Minute

// adminServer serves /metrics, /healthz, /readyz (and pprof).
func (a *App) adminServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("/readyz", a.health.Readyz)
	limits := a.cfg.HTTP
	if a.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		limits = limits.AtLeast(pprofTimeout)
	}
	return httpserver.New(mux, limits)
}
