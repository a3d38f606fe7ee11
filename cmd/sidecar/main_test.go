package main

import (
	"flag"
	"net"
	"strings"
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
	for name, addr := range map[string]string{"--http-bind-address": o.httpAddr, "--grpc-bind-address": o.grpcAddr,
		"--forward-auth-bind-address": o.fwdAuthAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("%s default %q: %v", name, addr, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("%s defaults to %q: want a loopback address", name, addr)
		}
	}
}

// TestForwardAuthTrustedCIDRs: the default trusts loopback only, and a bad entry is refused
// naming the flag.
func TestForwardAuthTrustedCIDRs(t *testing.T) {
	parse := func(args ...string) (options, error) {
		var o options
		fs := flag.NewFlagSet("sidecar", flag.ContinueOnError)
		o.bind(fs)
		if err := fs.Parse(append([]string{"--snapshot-file", "x"}, args...)); err != nil {
			t.Fatal(err)
		}
		_, err := o.check()
		return o, err
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if len(o.fwdAuthTrust) != 2 || o.fwdAuthTrust[0].String() != "127.0.0.1/32" || o.fwdAuthTrust[1].String() != "::1/128" {
		t.Errorf("default trusted CIDRs: %v", o.fwdAuthTrust)
	}
	if o, err = parse("--forward-auth-trusted-cidrs", " 10.0.0.0/8, ,fd00::/8"); err != nil || len(o.fwdAuthTrust) != 2 {
		t.Errorf("two CIDRs: %v, %v", o.fwdAuthTrust, err)
	}
	for _, bad := range []string{"10.0.0.1", "10.0.0.0/33", "nonsense/8"} {
		if _, err := parse("--forward-auth-trusted-cidrs", bad); err == nil || !strings.Contains(err.Error(), "--forward-auth-trusted-cidrs") {
			t.Errorf("%q: %v, want an error naming the flag", bad, err)
		}
	}
}
