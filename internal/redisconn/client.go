package redisconn

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterStateReload is how often a Cluster client refreshes its slot map unprompted.
const ClusterStateReload = 2 * time.Second

// NewClient builds a client for o's topology. It does not connect: go-redis dials lazily, so a
// Redis that is down at start-up is noticed by the first command, not here.
func NewClient(o Options) (redis.UniversalClient, error) {
	u, err := o.universal()
	if err != nil {
		return nil, err
	}
	switch o.Mode {
	case ModeCluster:
		c := u.Cluster()
		// A dead primary answers nothing, so no MOVED ever tells go-redis its replica took
		// over: reload the slot map often (default 60s), or checks for that shard are decided
		// without Redis for a minute after a failover. The limiter also asks for a reload
		// when a call fails.
		c.ClusterStateReloadInterval = ClusterStateReload
		return redis.NewClusterClient(c), nil
	case ModeSentinel:
		u.MasterName = o.MasterName
		return redis.NewFailoverClient(u.Failover()), nil
	default:
		return redis.NewClient(u.Simple()), nil
	}
}

// NodeOptions returns how to reach the one node at addr as NewClient reaches every node:
// the TLS, credentials (read for every new connection) and timeouts of o, never resending a
// command. With sentinel true it reaches a Sentinel: without the credentials, since
// Sentinels are asked as their default user. It is for work that must visit each node of
// a Sentinel deployment itself (the ACL users of every node), which NewClient's client,
// always on the current primary, cannot do.
func (o *Options) NodeOptions() (func(addr string, sentinel bool) *redis.Options, error) {
	u, err := o.universal()
	if err != nil {
		return nil, err
	}
	return func(addr string, sentinel bool) *redis.Options {
		opts := u.Simple()
		opts.Addr = addr
		if sentinel {
			opts.CredentialsProviderContext, opts.DB = nil, 0
		}
		return opts
	}, nil
}

// universal validates o (Validate, which fills in defaults) and returns the go-redis
// configuration shared by every topology.
func (o *Options) universal() (*redis.UniversalOptions, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	creds, err := o.credentials()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := o.TLS.config()
	if err != nil {
		return nil, err
	}
	return &redis.UniversalOptions{
		Addrs: o.Addrs,
		DB:    o.DB,
		// Read for every new connection: a rotated password needs no restart.
		CredentialsProviderContext: creds,
		// One config for every connection: the server, each Cluster node, and in Sentinel
		// mode both the Sentinels and the primary.
		TLSConfig: tlsConfig,
		// Per-call deadlines (the limiter's timeout) must cut socket reads short.
		ContextTimeoutEnabled: true,
		// Never resend a command after a network error: an EVALSHA whose reply was lost may
		// have run, and running it again would debit the request twice. The limiter's failure
		// mode and breaker handle the error instead. (Cluster redirects, MOVED and ASK, are
		// still followed: the command did not run on the node that redirected it.)
		MaxRetries: -1,
		// A refused connection fails at once: go-redis's default of 5 dial attempts 100ms
		// apart made every check against a dead Redis wait out the whole per-check timeout
		// until the circuit breaker opened (the breaker's probe redials in the background).
		DialerRetries:      1,
		DialerRetryTimeout: 10 * time.Millisecond,
	}, nil
}

// credentials is the provider reading o.CredentialsPath for each new connection (else
// o.Credentials), nil without AUTH. The first read happens here, so a missing Secret stops
// start-up.
func (o *Options) credentials() (func(context.Context) (string, string, error), error) {
	if o.CredentialsPath == "" {
		return o.Credentials, nil
	}
	f, err := newCredentialsFile(o.CredentialsPath)
	if err != nil {
		return nil, fmt.Errorf("--redis-credentials-path: %w", err)
	}
	return f.provide, nil
}
