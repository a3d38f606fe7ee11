package redisacl

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// NodesOf reaches every node of the deployment rdb (built by redisconn.NewClient from ro)
// reaches: the server; every node of a Cluster; the primary and replicas the Sentinels
// name. Each is dialled with ro's TLS and credentials. Close releases the node clients;
// rdb itself stays the caller's. The manager's per-namespace users and its Redis memory
// checks both visit every node through it.
func NodesOf(rdb redis.UniversalClient, ro redisconn.Options) (n Nodes, closeNodes func() error, err error) {
	opts, err := ro.NodeOptions()
	if err != nil {
		return nil, nil, fmt.Errorf("redis nodes: %w", err)
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		cn := &ClusterNodes{Cluster: c, Options: opts}
		return cn, cn.Close, nil
	case *redis.Client:
		if ro.Mode == redisconn.ModeSentinel {
			sn := &SentinelNodes{Sentinels: ro.Addrs, MasterName: ro.MasterName, Options: opts}
			return sn, sn.Close, nil
		}
		return ServerNodes(c), func() error { return nil }, nil
	default:
		return nil, nil, fmt.Errorf("redis nodes: unsupported client %T", rdb)
	}
}
