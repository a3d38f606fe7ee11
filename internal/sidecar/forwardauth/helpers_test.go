package forwardauth_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/forwardauth"
)

// loopback are the CIDRs the tests' own requests come from.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}

// front serves e's forward auth to peers within trusted, on loopback.
func front(t *testing.T, e *engine.Engine, trusted []netip.Prefix) string {
	t.Helper()
	srv := httptest.NewServer(forwardauth.NewHandler(e, trusted, logr.Discard()))
	t.Cleanup(srv.Close)
	return srv.URL
}

// caddy is what Caddy's forward_auth sends for a client's GET of uri on host "shop.example"
// from client address 203.0.113.7, plus extra header pairs.
func caddy(uri string, extra ...string) []string {
	return append([]string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", uri, "X-Forwarded-Host", "shop.example",
		"X-Forwarded-Proto", "http", "X-Forwarded-For", "203.0.113.7"}, extra...)
}

// nginx is what the shipped nginx.conf sends for a client's GET of uri on "shop.example"
// from 203.0.113.7, plus extra header pairs.
func nginx(uri string, extra ...string) []string {
	return append([]string{"X-Original-URL", "http://shop.example" + uri, "X-Original-Method", "GET",
		"X-Forwarded-For", "203.0.113.7"}, extra...)
}
