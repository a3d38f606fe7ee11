// Package redisclient connects tests to Redis as a given ACL user, the way the manager and
// the sidecars build their clients, and builds a namespace's user as the operator does. It
// lives apart from test/support/redistest, which the packages it imports test themselves
// with.
package redisclient

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// As reaches addrs in mode (standalone or Cluster) as user, as the manager and the sidecars
// build their clients (redisconn.NewClient, the credentials read from a mounted Secret), and
// returns the client with every node of the deployment as the manager finds them
// (redisacl.NodesOf). Both are released when the test ends.
func As(t testing.TB, mode redisconn.Mode, addrs []string, user, password string) (redis.UniversalClient, redisacl.Nodes) {
	t.Helper()
	return Connect(t, redisconn.Options{Mode: mode, Addrs: addrs, CredentialsPath: redistest.CredentialsDir(t, user, password)})
}

// Connect is As for any options (a Sentinel's master name, a database): the client
// redisconn.NewClient builds from o, and every node redisacl.NodesOf finds through it.
// Neither dials before it is used. Both are released when the test ends.
func Connect(t testing.TB, o redisconn.Options) (redis.UniversalClient, redisacl.Nodes) {
	t.Helper()
	c, err := redisconn.NewClient(o)
	if err != nil {
		t.Fatalf("redisclient: client of %v: %v", o.Addrs, err)
	}
	nodes, closeNodes, err := redisacl.NodesOf(c, o)
	if err != nil {
		_ = c.Close()
		t.Fatalf("redisclient: nodes of %v: %v", o.Addrs, err)
	}
	t.Cleanup(func() {
		_ = closeNodes() // the test is over: nothing to do about a close error
		_ = c.Close()
	})
	return c, nodes
}
