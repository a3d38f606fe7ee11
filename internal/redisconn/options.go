// Package redisconn turns command-line flags into a go-redis client for the three Redis
// topologies the operator supports: standalone, Cluster and Sentinel. Credentials come from a
// mounted Secret, never from flags, custom resources or snapshots.
package redisconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
)

// Mode is a Redis topology.
type Mode string

const (
	// ModeStandalone is a single Redis server (or a proxy that behaves like one).
	ModeStandalone Mode = "standalone"
	// ModeCluster is Redis Cluster; keys are routed by hash slot.
	ModeCluster Mode = "cluster"
	// ModeSentinel is a primary with replicas, discovered through Sentinel.
	ModeSentinel Mode = "sentinel"
)

// Options says how to reach Redis. Its zero value is not valid; bind it to flags with
// BindFlags and check it with Validate.
type Options struct {
	// Mode is the topology.
	Mode Mode
	// Addrs are host:port endpoints: the server, seed Cluster nodes, or the Sentinels.
	Addrs []string
	// MasterName is the Sentinel master name; Sentinel mode only.
	MasterName string
	// DB is the logical database; standalone and Sentinel only (Cluster has only 0).
	DB int
	// CredentialsPath is a mounted kubernetes.io/basic-auth Secret: a directory holding
	// "username" and "password" files. Empty means no AUTH, unless Credentials is set.
	CredentialsPath string
	// Credentials, when set (and CredentialsPath is not), supplies the AUTH user and
	// password for each new connection: the manager's for a RedisBackend, whose Secret it
	// reads through the API server. Never bound to a flag.
	Credentials func(ctx context.Context) (username, password string, err error)
	// TLS configures TLS; off by default.
	TLS TLSOptions
}

// BindFlags registers the Redis flags on fs, writing into o.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar((*string)(&o.Mode), "redis-mode", string(ModeStandalone),
		"Redis topology: standalone, cluster or sentinel.")
	fs.Func("redis-addrs", "Comma-separated Redis endpoints (host:port): the server, Cluster seed nodes, or Sentinels. Default 127.0.0.1:6379.",
		func(v string) error {
			o.Addrs = splitAddrs(v)
			return nil
		})
	fs.StringVar(&o.MasterName, "redis-master-name", "", "Sentinel master name (sentinel mode only).")
	fs.IntVar(&o.DB, "redis-db", 0, "Redis logical database (standalone and sentinel modes).")
	fs.StringVar(&o.CredentialsPath, "redis-credentials-path", "",
		"Directory of a mounted kubernetes.io/basic-auth Secret holding 'username' and 'password' files for Redis AUTH.")
	o.TLS.bindFlags(fs)
}

// Validate reports the first problem with o, naming the flag to fix. It fills in the default
// endpoint when none was given.
func (o *Options) Validate() error {
	if len(o.Addrs) == 0 {
		o.Addrs = []string{"127.0.0.1:6379"}
	}
	switch o.Mode {
	case ModeStandalone:
		if len(o.Addrs) != 1 {
			return fmt.Errorf("--redis-addrs: standalone mode takes exactly one endpoint, got %d", len(o.Addrs))
		}
	case ModeCluster:
		if o.DB != 0 {
			return errors.New("--redis-db: Redis Cluster has only database 0")
		}
	case ModeSentinel:
		if o.MasterName == "" {
			return errors.New("--redis-master-name: required in sentinel mode")
		}
	default:
		return fmt.Errorf("--redis-mode: %q is not one of standalone, cluster, sentinel", o.Mode)
	}
	for _, a := range o.Addrs {
		if !strings.Contains(a, ":") {
			return fmt.Errorf("--redis-addrs: %q is not host:port", a)
		}
	}
	if o.DB < 0 {
		return fmt.Errorf("--redis-db: %d is negative", o.DB)
	}
	if o.CredentialsPath != "" && o.Credentials != nil {
		return errors.New("--redis-credentials-path: set together with in-memory credentials")
	}
	return o.TLS.validate()
}

func splitAddrs(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Topology is the public part of the options, without credentials: what sidecars are told.
type Topology struct {
	// Mode is the topology.
	Mode Mode
	// Addrs are the endpoints.
	Addrs []string
	// MasterName is the Sentinel master name.
	MasterName string
	// DB is the logical database.
	DB int
	// TLS is true when Redis is reached over TLS.
	TLS bool
}

// Topology returns the options without the credentials path and the TLS file paths.
func (o *Options) Topology() Topology {
	return Topology{Mode: o.Mode, Addrs: append([]string(nil), o.Addrs...), MasterName: o.MasterName, DB: o.DB,
		TLS: o.TLS.Enabled}
}
