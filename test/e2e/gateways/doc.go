// Package gateways holds the end-to-end tests of the sidecar's forward-auth front behind
// real proxies: Caddy (forward_auth) and nginx (auth_request), from the Debian packages
// (make proxies), each run with its recipe from config/gateways as shipped, in front of a
// real upstream, the real sidecar binary and a real redis-server. Under CI=true a missing
// proxy fails the tests (test/support/missing).
package gateways
