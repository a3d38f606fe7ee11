package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// SlotCount is the number of hash slots in a Redis Cluster.
	SlotCount = 16384

	formTimeout = 30 * time.Second // until a started cluster is fully formed
	cmdTimeout  = 5 * time.Second  // one admin command while forming
)

// ClusterOption configures StartCluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	replicas int
	nodeOpts []Option
}

// WithReplicas gives every primary r replicas (default 0).
func WithReplicas(r int) ClusterOption {
	return func(c *clusterConfig) { c.replicas = r }
}

// WithNodeOptions applies server options (WithArgs, WithPassword, ...) to every node.
func WithNodeOptions(opts ...Option) ClusterOption {
	return func(c *clusterConfig) { c.nodeOpts = append(c.nodeOpts, opts...) }
}

// Cluster is a Redis Cluster of redis-server processes on loopback, owned by a test.
type Cluster struct {
	primaries []*Server
	replicas  []*Server // replicas of primary i at [i*r, (i+1)*r)
	password  string

	clients closers[*redis.ClusterClient]
}

// StartCluster starts primaries primary nodes (and, with WithReplicas, r replicas per
// primary) in cluster mode, splits the 16384 slots evenly across the primaries, and waits
// up to 30 s until every node reports cluster_state:ok, knows every node and sees all slots
// covered. The nodes are stopped by their PIDs when the test ends. Requires Redis 7 or newer.
func StartCluster(t testing.TB, primaries int, opts ...ClusterOption) *Cluster {
	t.Helper()
	var cfg clusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	if primaries < 1 || cfg.replicas < 0 || primaries > SlotCount {
		t.Fatalf("redistest: invalid cluster shape: %d primaries, %d replicas each", primaries, cfg.replicas)
	}
	requireClusterSupport(t)
	nodeOpts := append([]Option{withCluster()}, cfg.nodeOpts...)
	c := &Cluster{}
	for range primaries {
		c.primaries = append(c.primaries, StartServer(t, nodeOpts...))
	}
	for range primaries * cfg.replicas {
		c.replicas = append(c.replicas, StartServer(t, nodeOpts...))
	}
	c.password = c.primaries[0].cfg.password
	t.Cleanup(c.clients.closeAll)
	if err := c.form(cfg.replicas); err != nil {
		t.Fatalf("redistest: form cluster of %d primaries with %d replicas each: %v\n%s",
			primaries, cfg.replicas, err, c.describe())
	}
	return c
}

// requireClusterSupport fails the test unless redis-server is at least 7.0, which
// --cluster-port, CLUSTER MEET with a bus port and CLUSTER ADDSLOTSRANGE need.
func requireClusterSupport(t testing.TB) {
	t.Helper()
	major, minor, err := serverVersion(RequireRedis(t))
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if major < 7 {
		t.Fatalf("redistest: StartCluster needs redis-server >= 7.0, found %d.%d; %s", major, minor, installHint)
	}
}

// Addrs returns the addresses of all nodes, primaries first.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.Nodes() {
		addrs = append(addrs, n.Addr())
	}
	return addrs
}

// Nodes returns all nodes, primaries first, then the replicas in the order of Replicas.
func (c *Cluster) Nodes() []*Server {
	return append(append([]*Server(nil), c.primaries...), c.replicas...)
}

// Primaries returns the nodes started as primaries, in slot order: primary i was assigned
// the i-th contiguous share of the slots. Roles may change later, e.g. after a failover.
func (c *Cluster) Primaries() []*Server { return append([]*Server(nil), c.primaries...) }

// Replicas returns the nodes started as replicas; with r replicas per primary, the replicas
// of Primaries()[i] are Replicas()[i*r : (i+1)*r].
func (c *Cluster) Replicas() []*Server { return append([]*Server(nil), c.replicas...) }

// ClusterOptions returns go-redis cluster client options seeded with every node, for tests
// that need to tune the client. The caller owns and must close clients built from them.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), Password: c.password}
}

// Client returns a new go-redis cluster client; it is closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	return c.clients.add(redis.NewClusterClient(c.ClusterOptions()))
}

// PrimaryForKey asks the running nodes which node currently serves key's hash slot as
// primary, and returns it. It fails the test if no running node can tell.
func (c *Cluster) PrimaryForKey(t testing.TB, key string) *Server {
	t.Helper()
	var errs []error
	for _, n := range c.Nodes() {
		if !n.Running() {
			continue
		}
		owner, err := c.primaryForKey(n, key)
		if err == nil {
			return owner
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.Addr(), err))
	}
	t.Fatalf("redistest: find primary for key %q: %v", key, errs)
	return nil
}

// primaryForKey asks node n for key's slot and the primary serving it.
func (c *Cluster) primaryForKey(n *Server, key string) (*Server, error) {
	return withAdmin(n, func(ctx context.Context, rc *redis.Client) (*Server, error) {
		slot, err := rc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER KEYSLOT: %w", err)
		}
		shards, err := rc.ClusterShards(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER SHARDS: %w", err)
		}
		for _, sh := range shards {
			if !servesSlot(sh, slot) {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					return c.nodeByAddr(fmt.Sprintf("%s:%d", n.IP, n.Port))
				}
			}
		}
		return nil, fmt.Errorf("slot %d is not served", slot)
	})
}

// servesSlot reports whether shard sh owns slot.
func servesSlot(sh redis.ClusterShard, slot int64) bool {
	for _, r := range sh.Slots {
		if r.Start <= slot && slot <= r.End {
			return true
		}
	}
	return false
}

// nodeByAddr returns the node listening on addr.
func (c *Cluster) nodeByAddr(addr string) (*Server, error) {
	for _, n := range c.Nodes() {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node of this cluster at %s", addr)
}

// withAdmin runs fn with a short-lived client for node n.
func withAdmin[T any](n *Server, fn func(context.Context, *redis.Client) (T, error)) (T, error) {
	opts := n.Options()
	opts.MaxRetries, opts.PoolSize = -1, 1
	rc := redis.NewClient(opts)
	defer func() { _ = rc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	return fn(ctx, rc)
}

// do runs one command on node n and returns its reply.
func do(n *Server, args ...any) (any, error) {
	return withAdmin(n, func(ctx context.Context, rc *redis.Client) (any, error) {
		v, err := rc.Do(ctx, args...).Result()
		if err != nil {
			return nil, fmt.Errorf("%s %v: %w", n.Addr(), args, err)
		}
		return v, nil
	})
}

// text runs one command on node n that answers with a string.
func text(n *Server, args ...any) (string, error) {
	v, err := do(n, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s %v: unexpected reply %T", n.Addr(), args, v)
	}
	return s, nil
}
