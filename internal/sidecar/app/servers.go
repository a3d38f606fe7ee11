package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
)

// servers are the listeners the sidecar runs: the fronts, stopped together, and the admin
// server, closed last.
type servers struct {
	log    logr.Logger
	grace  time.Duration
	admin  *http.Server
	fronts []Front
}

// listenAdmin serves srv on addr from the start; it is closed last.
func (s *servers) listenAdmin(addr string, srv *http.Server) error {
	if err := s.serve("metrics", addr, srv); err != nil {
		return err
	}
	s.admin = srv
	return nil
}

// listen serves front f, unless it has no address.
func (s *servers) listen(f Front) error {
	if f.Addr == "" {
		return nil
	}
	if err := s.serve(f.Name, f.Addr, f.Server); err != nil {
		return err
	}
	s.fronts = append(s.fronts, f)
	return nil
}

// serve listens on addr and serves srv there until it is shut down.
func (s *servers) serve(name, addr string, srv Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s server: %w", name, err)
	}
	s.log.Info("serving", "server", name, "address", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "server stopped", "server", name)
		}
	}()
	return nil
}

// stop drains the fronts: no new connections, in-flight requests finish within grace.
func (s *servers) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.grace)
	defer cancel()
	for _, f := range s.fronts {
		if err := f.Server.Shutdown(ctx); err != nil {
			s.log.Error(err, "server did not drain in time", "server", f.Name)
		}
	}
}

func (s *servers) closeAdmin() {
	if s.admin != nil {
		_ = s.admin.Close() // last to go; the process is exiting
	}
}
