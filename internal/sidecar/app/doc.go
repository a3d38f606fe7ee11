// Package app runs the sidecar: New assembles the engine (snapshot store, metrics) and the
// probes; Run serves the admin listener (/metrics, /healthz, /readyz, optional pprof), feeds
// the store from the snapshot source, serves the fronts, connects to Redis (from the Redis
// options, or from the first snapshot naming Redis), and on shutdown turns unready, waits
// the drain delay and stops the fronts within the grace period. When the OTEL_* environment
// asks for tracing (package tracing), Run sets it up first and flushes the spans last.
//
// # Fronts
//
// A front is one way requests reach the engine, and each is its own package that builds a
// Server over the engine: envoyrls (Envoy RLS v3) and extauthz (Envoy ext_authz v3), both
// served by one grpcserver; httpcheck (the JSON check API), forwardauth (forward auth for
// Caddy, Traefik and nginx) and proxy (the reverse proxy). Run takes them as a list of Front, each naming its
// listen address, so a new front is its package plus one line in that list (cmd/sidecar):
//
//	fronts := []app.Front{
//		{Name: "grpc", Addr: grpcAddr, Server: grpcserver.New(envoyrls.New(a.Engine, log), extauthz.New(a.Engine, log))},
//		{Name: httpcheck.FrontName, Addr: httpAddr, Server: httpcheck.NewServer(a.Engine, limits, log)},
//	}
//	return a.Run(ctx, fronts...)
//
// Any Server with Serve and Shutdown will do: *http.Server is one.
package app
