package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/ratelimit-dev/ratelimit-operator/internal/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/app"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/proxy"
)

// grpcStreamWorkers is the gRPC front's worker pool, sized for 64 concurrent callers.
const grpcStreamWorkers = 64

// pprofTimeout is the least read and write timeout of the metrics listener with --pprof:
// a CPU profile (30s by default) or a trace answers only when it ends.
const pprofTimeout = 2 * time.Minute

// servers are the listeners the sidecar runs, stopped together.
type servers struct {
	log    logr.Logger
	grace  time.Duration
	limits httpserver.Limits
	admin  *http.Server
	https  []*http.Server
	grpc   *grpc.Server
}

// listenAdmin serves /metrics, /healthz, /readyz (and pprof) from the start.
func (s *servers) listenAdmin(addr string, reg *prometheus.Registry, h *app.Health, withPprof bool) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", app.Healthz)
	mux.HandleFunc("/readyz", h.Readyz)
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	limits := s.limits
	if withPprof {
		limits = limits.AtLeast(pprofTimeout)
	}
	srv, err := s.listenHTTP("metrics", addr, httpserver.New(mux, limits))
	s.admin = srv
	return err
}

// listenFronts starts the fronts the flags enable.
func (s *servers) listenFronts(o options, upstream *url.URL, e *engine.Engine) error {
	if o.httpAddr != "" {
		if err := s.addHTTP("check", o.httpAddr, httpcheck.NewServer(e, s.limits)); err != nil {
			return err
		}
	}
	if upstream != nil {
		if err := s.addHTTP("proxy", o.proxyAddr, proxy.NewServer(e, upstream, s.limits, s.log.WithName("proxy"))); err != nil {
			return err
		}
	}
	if o.grpcAddr != "" {
		return s.listenGRPC(o.grpcAddr, e)
	}
	return nil
}

func (s *servers) addHTTP(name, addr string, srv *http.Server) error {
	srv, err := s.listenHTTP(name, addr, srv)
	if srv != nil {
		s.https = append(s.https, srv)
	}
	return err
}

// listenHTTP serves srv on addr; srv is nil when addr cannot be listened on.
func (s *servers) listenHTTP(name, addr string, srv *http.Server) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s server: %w", name, err)
	}
	s.log.Info("serving", "server", name, "address", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "server stopped", "server", name)
		}
	}()
	return srv, nil
}

func (s *servers) listenGRPC(addr string, e *engine.Engine) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("grpc server: %w", err)
	}
	// A fixed pool of stream workers: without it every call starts a goroutine whose stack
	// grows afresh, a cost that shows in the front's CPU profile (test/bench/sidecar).
	s.grpc = grpc.NewServer(grpc.NumStreamWorkers(grpcStreamWorkers))
	(&envoyrls.Server{Engine: e, Log: s.log.WithName("envoy")}).Register(s.grpc)
	s.log.Info("serving", "server", "grpc", "address", ln.Addr().String())
	go func() {
		if err := s.grpc.Serve(ln); err != nil {
			s.log.Error(err, "grpc server stopped")
		}
	}()
	return nil
}

// stop drains the fronts: no new connections, in-flight requests finish within grace.
func (s *servers) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.grace)
	defer cancel()
	for _, srv := range s.https {
		if err := srv.Shutdown(ctx); err != nil {
			s.log.Error(err, "http server did not drain in time")
		}
	}
	if s.grpc != nil {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
		}
	}
}

func (s *servers) closeAdmin() {
	if s.admin != nil {
		_ = s.admin.Close() // last to go; the process is exiting
	}
}
