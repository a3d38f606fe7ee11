package envoyrls

import (
	"context"
	"net"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// streamWorkers is the gRPC server's pool of stream workers, sized for 64 concurrent callers.
const streamWorkers = 64

// Server is the front's gRPC server: the Service over an engine, served on a listener and
// stopped gracefully.
type Server struct {
	grpc *grpc.Server
}

// NewServer is the gRPC server of the Service over e, which logs its denials to log.
func NewServer(e *engine.Engine, log logr.Logger) *Server {
	// A fixed pool of stream workers: without it every call starts a goroutine whose stack
	// grows afresh, a cost that shows in the front's CPU profile (test/bench/sidecar).
	g := grpc.NewServer(grpc.NumStreamWorkers(streamWorkers))
	(&Service{Engine: e, Log: log}).Register(g)
	return &Server{grpc: g}
}

// Serve answers the calls of the connections ln accepts until Shutdown, then returns nil.
func (s *Server) Serve(ln net.Listener) error { return s.grpc.Serve(ln) }

// Shutdown stops accepting calls and waits for those in flight; when ctx ends first it
// closes them and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.grpc.Stop()
		return ctx.Err()
	}
}
