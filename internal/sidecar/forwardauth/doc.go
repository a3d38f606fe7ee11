// Package forwardauth is the sidecar's forward-auth front: a proxy in front of the app
// (Caddy, Traefik, nginx, ingress-nginx) asks it about each client request before
// forwarding it, and the sidecar judges the original request (its method, host, path, query,
// headers and client address) exactly as the reverse-proxy front judges one it receives.
//
// # Mapping
//
// Two paths, one per protocol family; the method of the auth request itself is never read
// (Caddy sends GET, nginx the original method, HEAD is answered without a body):
//
//	/v1/forward-auth   Caddy forward_auth, Traefik ForwardAuth
//	    original request: X-Forwarded-Method, X-Forwarded-Uri (path and query),
//	    X-Forwarded-Host (Caddy's forward_auth sets the first two, its reverse_proxy the
//	    host, X-Forwarded-Proto and X-Forwarded-For)
//	    admit: 200, empty body, RateLimit and RateLimit-Policy
//	    deny:  429, Retry-After, RateLimit, RateLimit-Policy, text/plain reason; the proxy
//	           copies this answer to the client as it is
//
//	/v1/auth-request   nginx auth_request, ingress-nginx auth-url
//	    original request: X-Original-URL (scheme://host/path?query: the shipped
//	    nginx.conf writes "$scheme://$host$request_uri", ingress-nginx
//	    "$scheme://$http_host$request_uri") and X-Original-Method; the auth request's own
//	    query parameter host, when the proxy's configuration writes one
//	    ("/v1/auth-request?host=$host"), replaces X-Original-URL's host
//	    admit: 200 with RateLimit and RateLimit-Policy
//	    deny:  403 with the same headers and body as the 429 above: auth_request turns any
//	           status but 2xx, 401 and 403 into a 500, so the denial travels as 403 and the
//	           shipped nginx.conf turns it back into a 429 (error_page 403 = @ratelimited)
//
// A header naming the original request that is missing or empty is answered 400 naming it;
// one sent on several field lines is answered 400 too, as is any header the policies read
// (requestread.ErrRepeatedHeader). A path the reverse proxy would refuse (an encoded "/", a dot
// segment that escapes the root) is answered 400; "//api/x" and "/API/x" are matched as the
// proxy matches them (package httppath). So is a host that is not a host name
// ("shop.example..", percent-encoded); "SHOP.example.:8443" is shop.example. Before the
// first snapshot the answer is 503.
//
// # Host
//
// The host judged must be the one the proxy routed on: the policies' match.http.hosts hold
// only where the proxy sends each host to its own app and refuses hosts it does not serve (the
// shipped Caddyfile and nginx.conf answer them 421). A request whose target is absolute
// ("GET http://shop.example/ HTTP/1.1") is routed by that target's host, whatever its Host
// header says: Caddy and Traefik (Go's server) send that host as X-Forwarded-Host, nginx
// names it $host, which the shipped nginx.conf writes into X-Original-URL. ingress-nginx
// writes the Host header ($http_host) there instead, so its recipe adds ?host=$host to the
// auth-url.
//
// # Client address
//
// The proxy appends the address it saw to X-Forwarded-For. The rightmost entry is therefore
// the engine's peer address, and the entries to its left are the request's X-Forwarded-For,
// so a ClientIP source's trustedProxies counts the proxies in front of the asking proxy, as
// it counts those in front of the reverse-proxy front. Without an X-Forwarded-For the
// request is refused 400 ("X-Forwarded-For: required"): the only other address is the
// proxy's own, and judging by it would put every client in one bucket.
//
// # Trust
//
// Whoever reaches this endpoint states the request it is judged by, so only peers within
// the trusted CIDRs (--forward-auth-trusted-cidrs, loopback by default) are answered; any
// other peer gets 421 Misdirected Request before anything of its request is read and
// nothing is debited. 421, not 403, because 403 means "rate limited" on /v1/auth-request,
// and neither proxy treats a 421 from its auth service as an admission.
//
// The policies read the original request's headers as the upstream receives them: the
// X-Forwarded-* and X-Original-* headers the proxy wrote, and the hop-by-hop headers
// (requestread.ForwardedHeader), are removed first.
//
// # Failure modes
//
// When Redis cannot answer, each policy's failure mode decides, as on every front: FailOpen
// admits (200), FailClosed denies (429, or 403 on /v1/auth-request), LocalCap counts in the
// sidecar. When the sidecar itself cannot be reached, the proxy decides: with the shipped
// recipes Caddy answers 502 and nginx 500, so every request is refused (fail closed) and
// none reaches the app (test/e2e/gateways checks both). Other statuses the front may answer
// (400, 421, 503) reach the client as they are through Caddy, and as a 500 through nginx.
package forwardauth
