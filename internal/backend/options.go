package backend

import (
	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// modes maps the API's topologies to redisconn's.
var modes = map[v1alpha1.RedisMode]redisconn.Mode{
	v1alpha1.RedisModeStandalone: redisconn.ModeStandalone,
	v1alpha1.RedisModeCluster:    redisconn.ModeCluster,
	v1alpha1.RedisModeSentinel:   redisconn.ModeSentinel,
}

// Options are the connection options of spec, without credentials or a CA bundle (the
// caller reads the Secrets): mode (Standalone when unset), endpoints, master name, database
// and whether TLS is on, with its server name.
func Options(spec v1alpha1.RedisBackendSpec) redisconn.Options {
	mode, ok := modes[spec.Mode]
	if !ok && spec.Mode == "" {
		mode = redisconn.ModeStandalone
	} else if !ok {
		mode = redisconn.Mode(spec.Mode) // refused by Validate, naming it
	}
	o := redisconn.Options{Mode: mode, Addrs: append([]string(nil), spec.Addrs...), MasterName: spec.MasterName,
		DB: int(spec.DB)}
	if spec.TLS != nil && spec.TLS.Enabled {
		o.TLS.Enabled, o.TLS.ServerName = true, spec.TLS.ServerName
	}
	return o
}

// Topology is what the sidecars of the namespaces spec serves are told of its Redis:
// never credentials.
func Topology(spec v1alpha1.RedisBackendSpec) redisconn.Topology {
	o := Options(spec)
	return o.Topology()
}
