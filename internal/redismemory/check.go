package redismemory

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Node is what one check round found on one node.
type Node struct {
	// Addr is the node's host:port.
	Addr string
	// Settings are its memory settings and use; valid when Err is nil.
	Settings
	// Err is why the node's settings could not be read; nil when they were.
	Err error
	// Missing are ACL rules the manager's user lacks on this node, in the order of Rules.
	Missing []string
	// Clients are the tenant users' connections, by namespace; nil without tenant users.
	Clients map[string]Clients
}

// Clients are one namespace's connections on one node.
type Clients struct {
	// Connections is how many are open.
	Connections int64
	// Memory is their buffers (CLIENT LIST tot-mem), in bytes.
	Memory int64
}

// nodeCommands are the pipelined commands of one node's check.
type nodeCommands struct {
	maxMemory, policy, clientLimit, replyLimit, maxBulk *redis.MapStringStringCmd
	memory, stats, replication                          *redis.StringCmd
	clients                                             *redis.Cmd // nil without tenant users
}

// checkNode reads one node's settings, and with tenantPrefix its tenant users' connections
// (users named <tenantPrefix><namespace>), in one round trip.
func checkNode(ctx context.Context, c *redis.Client, tenantPrefix string) Node {
	n := Node{Addr: c.Options().Addr}
	var cmds nodeCommands
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmds.maxMemory = p.ConfigGet(ctx, "maxmemory")
		cmds.policy = p.ConfigGet(ctx, "maxmemory-policy")
		cmds.clientLimit = p.ConfigGet(ctx, "maxmemory-clients")
		cmds.replyLimit = p.ConfigGet(ctx, "client-output-buffer-limit")
		cmds.maxBulk = p.ConfigGet(ctx, "proto-max-bulk-len")
		cmds.memory, cmds.stats, cmds.replication = p.Info(ctx, "memory"), p.Info(ctx, "stats"), p.Info(ctx, "replication")
		if tenantPrefix != "" {
			cmds.clients = p.Do(ctx, "CLIENT", "LIST", "TYPE", "normal")
		}
		return nil
	})
	if err != nil && !isRedisError(err) {
		n.Err = fmt.Errorf("check memory settings: %w", err)
		return n
	}
	n.Settings, n.Missing, n.Err = cmds.settings()
	if cmds.clients != nil {
		n.Clients, err = cmds.tenantClients(tenantPrefix)
		if rule, ok := refused(err, RuleClientList); ok {
			n.Missing = missingRules(n.Missing, []string{rule})
		}
	}
	return n
}

// settings reads the replies; a refused command adds its rule to missing.
func (c *nodeCommands) settings() (Settings, []string, error) {
	var missing []string
	var errs []error
	check := func(err error, rule string) {
		if r, ok := refused(err, rule); ok {
			missing = append(missing, r)
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	for _, cmd := range []*redis.MapStringStringCmd{c.maxMemory, c.policy, c.clientLimit, c.replyLimit, c.maxBulk} {
		check(cmd.Err(), RuleConfigGet)
	}
	for _, cmd := range []*redis.StringCmd{c.memory, c.stats, c.replication} {
		check(cmd.Err(), RuleInfo)
	}
	missing = missingRules(missing)
	if len(missing) > 0 {
		return Settings{}, missing, fmt.Errorf("the manager's Redis user lacks %s", strings.Join(missing, " "))
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, nil, fmt.Errorf("check memory settings: %w", err)
	}
	info := parseInfo(c.memory.Val(), c.stats.Val(), c.replication.Val())
	s := Settings{Policy: c.policy.Val()["maxmemory-policy"], MaxMemoryClients: c.clientLimit.Val()["maxmemory-clients"],
		UsedMemory: info.int("used_memory"), ClientMemory: info.int("mem_clients_normal"),
		EvictedKeys: info.int("evicted_keys"), Primary: info["role"] == "master"}
	s.MaxMemory, _ = strconv.ParseInt(c.maxMemory.Val()["maxmemory"], 10, 64)
	s.ReplyLimit = normalReplyLimit(c.replyLimit.Val()["client-output-buffer-limit"])
	s.MaxBulk, _ = strconv.ParseInt(c.maxBulk.Val()["proto-max-bulk-len"], 10, 64)
	return s, nil, nil
}

// tenantClients sums CLIENT LIST by tenant user, as namespaces.
func (c *nodeCommands) tenantClients(prefix string) (map[string]Clients, error) {
	text, err := c.clients.Text()
	if err != nil {
		return nil, fmt.Errorf("CLIENT LIST: %w", err)
	}
	out := map[string]Clients{}
	for _, line := range strings.Split(text, "\n") {
		f := clientFields(line)
		ns, ok := strings.CutPrefix(f["user"], prefix)
		if !ok || ns == "" {
			continue
		}
		mem, _ := strconv.ParseInt(f["tot-mem"], 10, 64)
		cl := out[ns]
		cl.Connections++
		cl.Memory += mem
		out[ns] = cl
	}
	return out, nil
}

// clientFields are one CLIENT LIST line's name=value fields.
func clientFields(line string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// info is the fields of INFO replies.
type info map[string]string

// parseInfo reads INFO replies ("name:value" lines, "#" section headers).
func parseInfo(replies ...string) info {
	out := info{}
	for _, text := range replies {
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok && !strings.HasPrefix(k, "#") {
				out[k] = v
			}
		}
	}
	return out
}

// int is a field as a number; 0 when absent.
func (i info) int(name string) int64 {
	n, _ := strconv.ParseInt(i[name], 10, 64)
	return n
}

// isRedisError reports whether err is a reply of Redis (such as NOPERM), not a failure to
// reach it: the pipeline's other replies are still good.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
