// Package grpcserver is the sidecar's gRPC listener: one grpc.Server that carries every gRPC
// front (Envoy RLS, Envoy ext_authz), so a gateway reaches all of them on one port.
package grpcserver

import (
	"context"
	"net"

	"google.golang.org/grpc"
)

// streamWorkers is the gRPC server's pool of stream workers, sized for 64 concurrent callers.
const streamWorkers = 64

// Service is a gRPC front's service: it registers itself on the server.
type Service interface {
	// Register adds the service to g.
	Register(g *grpc.Server)
}

// Server is the gRPC server of a list of services, served on a listener and stopped
// gracefully. It is an app.Server.
type Server struct {
	grpc *grpc.Server
}

// New is the gRPC server carrying services.
func New(services ...Service) *Server {
	// A fixed pool of stream workers: without it every call starts a goroutine whose stack
	// grows afresh, a cost that shows in the front's CPU profile (test/bench/sidecar).
	g := grpc.NewServer(grpc.NumStreamWorkers(streamWorkers))
	for _, s := range services {
		s.Register(g)
	}
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
