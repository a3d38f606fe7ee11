package app

import (
	"context"
	"net"
)

// Front is one front as the app serves it: where it listens and its server.
type Front struct {
	// Name names the front in logs.
	Name string
	// Addr is the address to listen on; empty disables the front.
	Addr string
	// Server answers on the listener the app opens for it.
	Server Server
}

// Server is a front's server. *http.Server is one, and so is envoyrls.Server.
type Server interface {
	// Serve answers the connections ln accepts until Shutdown.
	Serve(ln net.Listener) error
	// Shutdown stops accepting connections and waits for the requests in flight until ctx
	// ends.
	Shutdown(ctx context.Context) error
}
