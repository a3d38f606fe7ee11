package redisacl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Nodes reaches every node of one Redis deployment.
type Nodes interface {
	// ForEach calls fn on every node at once and returns every failure joined, each naming
	// its node.
	ForEach(ctx context.Context, fn func(ctx context.Context, node *redis.Client) error) error
}

// NodeOptions returns the client options for the node at addr; sentinel is true for a
// Sentinel, which is reached without the nodes' credentials (redisconn.Options.NodeOptions).
type NodeOptions func(addr string, sentinel bool) *redis.Options

// ServerNodes is the one server c reaches (standalone).
func ServerNodes(c *redis.Client) Nodes { return serverNode{c} }

// serverNode is one server.
type serverNode struct{ c *redis.Client }

func (s serverNode) ForEach(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	if err := fn(ctx, s.c); err != nil {
		return fmt.Errorf("%s: %w", s.c.Options().Addr, err)
	}
	return nil
}

// ClusterNodes are every node of a Cluster as CLUSTER NODES lists them: primaries and
// replicas (a replica promoted by a failover must already hold the users). Not the slot map
// of CLUSTER SLOTS, which leaves out a replica that has not replicated a byte yet. Nodes
// flagged fail, noaddr or handshake are left for a later round: they answer no one. Close
// releases the node clients.
type ClusterNodes struct {
	// Cluster asks any node for CLUSTER NODES.
	Cluster *redis.ClusterClient
	// Options dials one node.
	Options NodeOptions

	clients nodeClients
}

// ForEach implements Nodes.
func (n *ClusterNodes) ForEach(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	text, err := n.clusterNodes(ctx)
	if err != nil {
		return err
	}
	return n.clients.each(ctx, n.Options, clusterNodeAddrs(text), fn)
}

// clusterNodes is CLUSTER NODES of the first primary that answers. Asked of each primary's
// own client, not routed by the Cluster client: routing would first send COMMAND, which the
// administrative user is not granted.
func (n *ClusterNodes) clusterNodes(ctx context.Context) (string, error) {
	var mu sync.Mutex
	var text string
	var errs collected
	err := n.Cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		t, err := node.ClusterNodes(ctx).Result()
		if err != nil {
			errs.add(fmt.Errorf("%s: %w", node.Options().Addr, err))
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if text == "" {
			text = t
		}
		return nil
	})
	switch {
	case err != nil:
		return "", fmt.Errorf("cluster slot map: %w", err)
	case text == "":
		return "", fmt.Errorf("CLUSTER NODES: %w", errs.join())
	}
	return text, nil
}

// Close closes the node clients.
func (n *ClusterNodes) Close() error { return n.clients.close() }

// clusterNodeAddrs are the addresses of the nodes CLUSTER NODES lists as reachable.
func clusterNodeAddrs(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !reachable(f[2]) {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@") // ip:port@cport[,hostname]
		if host, _, ok := strings.Cut(addr, ":"); ok && host != "" {
			out = append(out, addr)
		}
	}
	return out
}

// reachable reports whether CLUSTER NODES flags say the node can be asked.
func reachable(flags string) bool {
	for _, f := range strings.Split(flags, ",") {
		switch f {
		case "fail", "noaddr", "handshake":
			return false
		}
	}
	return true
}

// nodeClients caches one client per node address.
type nodeClients struct {
	mu sync.Mutex
	m  map[string]*redis.Client
}

// each calls fn on the node at every address at once, dialled with opts.
func (c *nodeClients) each(ctx context.Context, opts NodeOptions, addrs []string,
	fn func(context.Context, *redis.Client) error) error {
	var errs collected
	var wg sync.WaitGroup
	for _, addr := range addrs {
		node := c.get(addr, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx, node); err != nil {
				errs.add(fmt.Errorf("%s: %w", addr, err))
			}
		}()
	}
	wg.Wait()
	return errs.join()
}

// get returns the client of addr, creating it.
func (c *nodeClients) get(addr string, opts NodeOptions) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*redis.Client{}
	}
	node, ok := c.m[addr]
	if !ok {
		node = redis.NewClient(opts(addr, false))
		c.m[addr] = node
	}
	return node
}

// close closes every client.
func (c *nodeClients) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for addr, node := range c.m {
		if err := node.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", addr, err))
		}
	}
	c.m = nil
	return errors.Join(errs...)
}

// collected gathers errors from concurrent calls.
type collected struct {
	mu   sync.Mutex
	errs []error
}

func (c *collected) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

func (c *collected) join() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}
