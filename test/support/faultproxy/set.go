package faultproxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
)

// Set is a proxy per Redis server, with a dialer that routes a client's connections to a
// server through its proxy. Give Dial to go-redis as Options.Dialer or ClusterOptions.Dialer:
// the client keeps using the servers' real addresses (those CLUSTER SLOTS reports), and
// every connection passes through the proxy of the address it was meant for.
type Set struct {
	mu       sync.Mutex
	byTarget map[string]*Proxy
	dialer   net.Dialer
}

// StartSet starts a proxy for each target address; they are closed when the test ends.
func StartSet(tb testing.TB, targets ...string) *Set {
	tb.Helper()
	s := &Set{byTarget: map[string]*Proxy{}}
	for _, t := range targets {
		s.byTarget[t] = Start(tb, t)
	}
	return s
}

// Proxy returns the proxy in front of target, or nil.
func (s *Set) Proxy(target string) *Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byTarget[target]
}

// Proxies returns every proxy of the set.
func (s *Set) Proxies() []*Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Proxy, 0, len(s.byTarget))
	for _, p := range s.byTarget {
		out = append(out, p)
	}
	return out
}

// Clear removes the faults of every proxy.
func (s *Set) Clear() {
	for _, p := range s.Proxies() {
		p.Clear()
	}
}

// Dial connects to addr through its proxy, or directly when the set has none for addr.
func (s *Set) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p := s.Proxy(addr); p != nil {
		addr = p.Addr()
	}
	c, err := s.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: dial %s: %w", addr, err)
	}
	return c, nil
}
