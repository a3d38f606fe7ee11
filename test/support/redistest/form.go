package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const formPollInterval = 50 * time.Millisecond

// form assigns the slots, joins all nodes, attaches the replicas and waits until every node
// sees a healthy cluster, all within formTimeout.
func (c *Cluster) form(replicas int) error {
	deadline := time.Now().Add(formTimeout)
	if err := c.assignSlots(); err != nil {
		return fmt.Errorf("assign slots: %w", err)
	}
	if err := c.meet(); err != nil {
		return fmt.Errorf("join nodes: %w", err)
	}
	if err := wait.Poll(time.Until(deadline), formPollInterval, c.allNodesKnown); err != nil {
		return fmt.Errorf("join nodes: %w", err)
	}
	if err := c.attachReplicas(replicas); err != nil {
		return fmt.Errorf("attach replicas: %w", err)
	}
	if err := wait.Poll(time.Until(deadline), formPollInterval, c.healthy); err != nil {
		return fmt.Errorf("wait for a healthy cluster: %w", err)
	}
	return nil
}

// assignSlots gives primary i a distinct config epoch and the i-th contiguous share of slots.
func (c *Cluster) assignSlots() error {
	n := len(c.primaries)
	for i, p := range c.primaries {
		lo, hi := i*SlotCount/n, (i+1)*SlotCount/n-1
		if _, err := do(p, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return err
		}
		if _, err := do(p, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return err
		}
	}
	return nil
}

// meet introduces every node to the first primary; gossip spreads the rest.
func (c *Cluster) meet() error {
	first := c.primaries[0]
	for _, n := range c.Nodes()[1:] {
		if _, err := do(first, "CLUSTER", "MEET", Host, n.port, n.busPort); err != nil {
			return err
		}
	}
	return nil
}

// attachReplicas makes each replica replicate its primary.
func (c *Cluster) attachReplicas(perPrimary int) error {
	for i, r := range c.replicas {
		p := c.primaries[i/perPrimary]
		id, err := text(p, "CLUSTER", "MYID")
		if err != nil {
			return err
		}
		if _, err := do(r, "CLUSTER", "REPLICATE", id); err != nil {
			return err
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	addr      string
	flags     []string
	linkState string
	slots     int // number of slot fields, 0 for a node without slots
}

// hasFlag reports whether the node carries the flag.
func (n clusterNode) hasFlag(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// parseClusterNodes parses a CLUSTER NODES reply.
func parseClusterNodes(reply string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(reply), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("malformed CLUSTER NODES line %q", line)
		}
		nodes = append(nodes, clusterNode{
			addr:      strings.SplitN(f[1], "@", 2)[0],
			flags:     strings.Split(f[2], ","),
			linkState: f[7],
			slots:     len(f) - 8,
		})
	}
	return nodes, nil
}

// clusterView returns node n's CLUSTER NODES, parsed.
func clusterView(n *Server) ([]clusterNode, error) {
	return withAdmin(n, func(ctx context.Context, rc *redis.Client) ([]clusterNode, error) {
		reply, err := rc.ClusterNodes(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("%s CLUSTER NODES: %w", n.Addr(), err)
		}
		return parseClusterNodes(reply)
	})
}

// clusterInfo returns node n's CLUSTER INFO as a map.
func clusterInfo(n *Server) (map[string]string, error) {
	return withAdmin(n, func(ctx context.Context, rc *redis.Client) (map[string]string, error) {
		reply, err := rc.ClusterInfo(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("%s CLUSTER INFO: %w", n.Addr(), err)
		}
		return parseInfo(reply), nil
	})
}

// replicationInfo returns node n's INFO replication as a map.
func replicationInfo(n *Server) (map[string]string, error) {
	return withAdmin(n, func(ctx context.Context, rc *redis.Client) (map[string]string, error) {
		reply, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return nil, fmt.Errorf("%s INFO replication: %w", n.Addr(), err)
		}
		return parseInfo(reply), nil
	})
}

// parseInfo parses "key:value" lines as returned by INFO and CLUSTER INFO.
func parseInfo(reply string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(reply, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// allNodesKnown checks that every node knows every other node with a connected link and no
// pending handshake.
func (c *Cluster) allNodesKnown() error {
	total := len(c.Nodes())
	for _, n := range c.Nodes() {
		view, err := clusterView(n)
		if err != nil {
			return err
		}
		if len(view) != total {
			return fmt.Errorf("%s knows %d of %d nodes", n.Addr(), len(view), total)
		}
		for _, v := range view {
			if v.hasFlag("handshake") || v.hasFlag("noaddr") || v.linkState != "connected" {
				return fmt.Errorf("%s sees %s as %v, link %s", n.Addr(), v.addr, v.flags, v.linkState)
			}
		}
	}
	return nil
}

// healthy checks that every node reports a healthy cluster of the expected shape.
func (c *Cluster) healthy() error {
	for _, n := range c.Nodes() {
		if err := c.checkInfo(n); err != nil {
			return err
		}
		if err := c.checkView(n); err != nil {
			return err
		}
	}
	for _, r := range c.replicas {
		if err := checkReplica(r); err != nil {
			return err
		}
	}
	return nil
}

// checkInfo checks node n's CLUSTER INFO: state ok, all slots served, all nodes known.
func (c *Cluster) checkInfo(n *Server) error {
	info, err := clusterInfo(n)
	if err != nil {
		return err
	}
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(SlotCount),
		"cluster_slots_ok":       strconv.Itoa(SlotCount),
		"cluster_known_nodes":    strconv.Itoa(len(c.Nodes())),
		"cluster_size":           strconv.Itoa(len(c.primaries)),
	}
	var errs []error
	for k, v := range want {
		if info[k] != v {
			errs = append(errs, fmt.Errorf("%s=%q, want %q", k, info[k], v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s CLUSTER INFO: %w", n.Addr(), err)
	}
	return nil
}

// checkView checks that node n sees the expected number of primaries and replicas, all
// connected and none failing.
func (c *Cluster) checkView(n *Server) error {
	view, err := clusterView(n)
	if err != nil {
		return err
	}
	primaries, replicas := 0, 0
	for _, v := range view {
		if v.hasFlag("fail") || v.hasFlag("fail?") || v.linkState != "connected" {
			return fmt.Errorf("%s sees %s as %v, link %s", n.Addr(), v.addr, v.flags, v.linkState)
		}
		switch {
		case v.hasFlag("master") && v.slots > 0:
			primaries++
		case v.hasFlag("slave"):
			replicas++
		}
	}
	if primaries != len(c.primaries) || replicas != len(c.replicas) {
		return fmt.Errorf("%s sees %d primaries with slots and %d replicas, want %d and %d",
			n.Addr(), primaries, replicas, len(c.primaries), len(c.replicas))
	}
	return nil
}

// checkReplica checks that replica r reports role slave with its replication link up.
func checkReplica(r *Server) error {
	info, err := replicationInfo(r)
	if err != nil {
		return err
	}
	if info["role"] != "slave" || info["master_link_status"] != "up" {
		return fmt.Errorf("%s: role=%q master_link_status=%q, want slave and up",
			r.Addr(), info["role"], info["master_link_status"])
	}
	return nil
}

// describe summarizes every node's state and log tail, for failure messages.
func (c *Cluster) describe() string {
	var b strings.Builder
	for _, n := range c.Nodes() {
		fmt.Fprintf(&b, "--- node %s pid %d running=%v dir %s\n", n.Addr(), n.PID(), n.Running(), n.Dir())
		if info, err := clusterInfo(n); err != nil {
			fmt.Fprintf(&b, "%v\n", err)
		} else {
			fmt.Fprintf(&b, "cluster_state=%s known_nodes=%s slots_ok=%s size=%s\n", info["cluster_state"],
				info["cluster_known_nodes"], info["cluster_slots_ok"], info["cluster_size"])
		}
		fmt.Fprintf(&b, "%s\n", tailFile(n.LogPath(), 8))
	}
	return b.String()
}
