package requestread

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

// HTTPRequest is an HTTP request as the limiter reads it. A front that sees whole HTTP
// requests (the reverse proxy, and forward auth or ext_authz alike) fills one.
type HTTPRequest struct {
	// Method is the request method as sent.
	Method string
	// Host is the request's host as sent (any port, any case): the Host header, or the
	// host the gateway routed on. One that is not a host name (CanonicalHost) makes the
	// request a bad request.
	Host string
	// Path is the request target's normalized path (ParseTarget).
	Path httppath.Path
	// Query is the request target's raw query.
	Query string
	// Header is the request's header as the upstream will receive it (ForwardedHeader): a
	// header the upstream never sees must decide nothing.
	Header http.Header
	// Peer is the connection's remote address (host:port or host).
	Peer string
}

// DescriptorEntry is one key/value entry of an Envoy rate limit descriptor.
type DescriptorEntry struct {
	// Key is the entry's key.
	Key string
	// Value is the entry's value.
	Value string
}

// BadRequestError is the error of a request that cannot be judged (a path that upstreams
// read differently, a header sent twice, a cost out of bounds). Nothing was debited; a
// front answers 400 with Error().
type BadRequestError struct {
	// Err names the field at fault.
	Err error
}

func (e *BadRequestError) Error() string { return e.Err.Error() }

func (e *BadRequestError) Unwrap() error { return e.Err }

// ParseTarget is the normalized path and the raw query of an HTTP request target (origin
// form "/a?q", absolute form, or "*" for OPTIONS), as every front that judges whole HTTP
// requests reads it. A refused path is a BadRequestError naming the path.
func ParseTarget(method, target string) (httppath.Path, string, error) {
	_, query, _ := strings.Cut(target, "?")
	p, err := httppath.ParseTarget(method, httppath.TargetPath(target))
	if err != nil {
		return httppath.Path{}, "", &BadRequestError{Err: fmt.Errorf("path: %w", err)}
	}
	return p, query, nil
}
