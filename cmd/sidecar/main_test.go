package main

import (
	"flag"
	"net"
	"testing"
)

// TestDecisionFrontsDefaultToLoopback: the check API and the Envoy front take the caller's
// identity from the request itself, so whoever reaches them can spend (or read) any caller's
// quota: by default only callers inside the pod may. The reverse proxy, which reads identity
// from the request the app receives, and metrics listen on every interface.
func TestDecisionFrontsDefaultToLoopback(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("sidecar", flag.ContinueOnError)
	o.bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	for name, addr := range map[string]string{"--http-bind-address": o.httpAddr, "--grpc-bind-address": o.grpcAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("%s default %q: %v", name, addr, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("%s defaults to %q: want a loopback address", name, addr)
		}
	}
}
