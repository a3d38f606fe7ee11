package redisacl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SentinelNodes are the primary that the Sentinels name for MasterName and the replicas
// they list as up. A replica Sentinel reports down (s_down, o_down) or disconnected is left
// for a later round: Sentinel promotes only a replica it sees connected, so one that has been
// up for a round already holds the users. Close releases the node clients.
type SentinelNodes struct {
	// Sentinels are the Sentinel endpoints, asked in order until one answers.
	Sentinels []string
	// MasterName is the monitored master's name.
	MasterName string
	// Options dials one node or Sentinel.
	Options NodeOptions

	clients nodeClients
}

// ForEach implements Nodes.
func (s *SentinelNodes) ForEach(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	addrs, err := s.nodeAddrs(ctx)
	if err != nil {
		return err
	}
	return s.clients.each(ctx, s.Options, addrs, fn)
}

// Close closes the node clients.
func (s *SentinelNodes) Close() error { return s.clients.close() }

// nodeAddrs asks the Sentinels, in order, for the primary and its replicas.
func (s *SentinelNodes) nodeAddrs(ctx context.Context) ([]string, error) {
	errs := []error{}
	for _, addr := range s.Sentinels {
		sc := redis.NewSentinelClient(s.Options(addr, true))
		addrs, err := s.askSentinel(ctx, sc)
		_ = sc.Close() // a short-lived client: nothing to do about a close error
		if err == nil {
			return addrs, nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", addr, err))
	}
	return nil, fmt.Errorf("no Sentinel named the nodes of %q: %w", s.MasterName, errors.Join(errs...))
}

// askSentinel returns the primary's address and those of the replicas that are up.
func (s *SentinelNodes) askSentinel(ctx context.Context, sc *redis.SentinelClient) ([]string, error) {
	primary, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		return nil, fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME: %w", err)
	}
	if len(primary) != 2 {
		return nil, fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME: reply %v", primary)
	}
	replicas, err := sc.Replicas(ctx, s.MasterName).Result()
	if err != nil {
		return nil, fmt.Errorf("SENTINEL REPLICAS: %w", err)
	}
	addrs := []string{net.JoinHostPort(primary[0], primary[1])}
	for _, r := range replicas {
		if up(r["flags"]) && r["ip"] != "" && r["port"] != "" {
			addrs = append(addrs, net.JoinHostPort(r["ip"], r["port"]))
		}
	}
	return addrs, nil
}

// up reports whether a Sentinel's flags for a replica say it is reachable.
func up(flags string) bool {
	for _, f := range strings.Split(flags, ",") {
		switch f {
		case "s_down", "o_down", "disconnected":
			return false
		}
	}
	return true
}
