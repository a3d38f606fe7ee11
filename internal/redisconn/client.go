package redisconn

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Credentials are the Redis AUTH user and password.
type Credentials struct {
	// Username is the ACL user; empty means the default user.
	Username string
	// Password is the user's password.
	Password string
}

// LoadCredentials reads a mounted kubernetes.io/basic-auth Secret directory. A missing
// "username" file means the default user; a missing "password" file is an error.
func LoadCredentials(dir string) (Credentials, error) {
	var c Credentials
	user, err := os.ReadFile(filepath.Join(dir, "username")) //nolint:gosec // the path is the operator's own flag
	switch {
	case err == nil:
		c.Username = strings.TrimRight(string(user), "\r\n")
	case !os.IsNotExist(err):
		return c, fmt.Errorf("read redis username: %w", err)
	}
	pass, err := os.ReadFile(filepath.Join(dir, "password")) //nolint:gosec // the path is the operator's own flag
	if err != nil {
		return c, fmt.Errorf("read redis password: %w", err)
	}
	c.Password = strings.TrimRight(string(pass), "\r\n")
	return c, nil
}

// ClusterStateReload is how often a Cluster client refreshes its slot map unprompted.
const ClusterStateReload = 2 * time.Second

// NewClient builds a client for o's topology. It does not connect: go-redis dials lazily, so a
// Redis that is down at start-up is noticed by the first command, not here.
func NewClient(o Options) (redis.UniversalClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var creds Credentials
	if o.CredentialsPath != "" {
		var err error
		if creds, err = LoadCredentials(o.CredentialsPath); err != nil {
			return nil, fmt.Errorf("--redis-credentials-path: %w", err)
		}
	}
	tlsConfig, err := o.TLS.config()
	if err != nil {
		return nil, err
	}
	u := &redis.UniversalOptions{
		Addrs:    o.Addrs,
		DB:       o.DB,
		Username: creds.Username,
		Password: creds.Password,
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
