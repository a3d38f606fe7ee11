package httpserver

import (
	"errors"
	"fmt"
	"time"
)

// Limits bounds what one client may take from a server. A zero duration disables that bound.
type Limits struct {
	// ReadHeaderTimeout bounds reading the request line and headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the request: all of it (New), or each wait for more of the
	// body (NewStreaming).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the answer: all of it, from the end of the request headers
	// (New), or each wait for the client to accept more of it (NewStreaming).
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers; more is answered 431.
	MaxHeaderBytes int
}

// The defaults, chosen for a sidecar in front of an app or behind a load balancer.
const (
	// DefaultReadHeaderTimeout: a real client sends its headers in one packet; 10s allows a
	// poor mobile link while bounding a client that trickles them (slowloris).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout: check bodies are at most 64 KiB, and a 30s stall in the middle of an
	// upload is a dead client.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout: nginx's send_timeout. A proxied answer may take longer in all; only
	// a client that accepts nothing for a minute is cut off.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout: longer than the idle timeouts of the usual load balancers and
	// proxies in front (60s for AWS ALB, nginx's keepalive_timeout 75s), so they close idle
	// connections first and never send a request on one the sidecar is closing.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxHeaderBytes: Envoy's 60 KiB default with room to spare, enough for a 16 KiB
	// JWT and large cookies; Go's own default is 1 MiB per request.
	DefaultMaxHeaderBytes = 64 << 10
)

// DefaultLimits are the limits the sidecar's flags default to.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
	}
}

// Validate refuses negative durations and a header limit below 1 KiB, naming the field.
func (l Limits) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read header timeout", l.ReadHeaderTimeout}, {"read timeout", l.ReadTimeout},
		{"write timeout", l.WriteTimeout}, {"idle timeout", l.IdleTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %v is negative", d.name, d.v))
		}
	}
	if l.MaxHeaderBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max header bytes: %d is below 1024", l.MaxHeaderBytes))
	}
	return errors.Join(errs...)
}

// AtLeast is l with every bound that is set raised to at least d (for a handler known to
// take longer, such as a CPU profile).
func (l Limits) AtLeast(d time.Duration) Limits {
	raise := func(v time.Duration) time.Duration {
		if v == 0 {
			return 0
		}
		return max(v, d)
	}
	l.ReadTimeout, l.WriteTimeout = raise(l.ReadTimeout), raise(l.WriteTimeout)
	return l
}
