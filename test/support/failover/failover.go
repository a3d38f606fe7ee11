// Package failover is a Redis primary and its replica for failover tests and benches: the
// replication link runs through a relay that can withhold the stream for real
// (faultproxy.Link: a frozen replica would still find the bytes in its socket buffer), and
// a client follows the failover as a Sentinel or Cluster client would.
package failover

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/faultproxy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// The lease-failover scenario (issue 25, item 4) that the limiter's test and the bench both
// run: a limit per hour (nothing refills meanwhile), the most one lease holds (a quarter of
// the limit, the share of a fresh identity's first lease), and the checks made while the
// replica receives nothing.
const (
	ScenarioLimit = 100
	ScenarioLease = 25
	ScenarioLag   = 5
)

// Pair is a primary, its replica and the relay between them. Hold the relay (Link.Hold) to
// make the replica lag; Fail to lose the primary.
type Pair struct {
	// Primary and Replica are the two servers; Link relays the replication stream.
	Primary, Replica *redistest.Server
	Link             *faultproxy.Link
	// current is the address Client's new connections dial.
	current atomic.Pointer[string]
}

// Start starts the pair for tb (stopped by PID when it ends) and waits up to 10 s until the
// primary lists the replica as online (ROLE: what a WAIT counts), its first sync done.
func Start(ctx context.Context, tb testing.TB) (*Pair, error) {
	tb.Helper()
	p := &Pair{Primary: redistest.StartServer(tb)}
	p.Link = faultproxy.StartLink(tb, p.Primary.Addr())
	p.Replica = redistest.StartReplicaVia(tb, p.Link.Port())
	addr := p.Primary.Addr()
	p.current.Store(&addr)
	if err := AwaitReplicas(ctx, p.Primary.Client(), 1); err != nil {
		return nil, fmt.Errorf("replica of %s: %w", p.Primary.Addr(), err)
	}
	return p, nil
}

// AwaitReplicas waits up to 10 s until primary's ROLE lists n replicas online (their first
// sync done): what a WAIT counts.
func AwaitReplicas(ctx context.Context, primary *redis.Client, n int) error {
	err := wait.Poll(10*time.Second, 10*time.Millisecond, func() error {
		role, err := primary.Do(ctx, "ROLE").Slice()
		if err != nil {
			return fmt.Errorf("ROLE: %w", err)
		}
		if replicas, ok := role[len(role)-1].([]any); !ok || len(role) != 3 || len(replicas) != n {
			return fmt.Errorf("ROLE %v: want a primary with %d replicas", role, n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replicas: %w", err)
	}
	return nil
}

// Client is a client whose every new connection dials the current primary (the replica once
// Fail promoted it), without retries: a failed call is the caller's to handle. The caller
// closes it.
func (p *Pair) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: *p.current.Load(), ContextTimeoutEnabled: true, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, *p.current.Load())
		}})
}

// Fail kills the primary (SIGKILL by its PID), drops what the link held, promotes the
// replica (REPLICAOF NO ONE) and points Client's new connections at it.
func (p *Pair) Fail(ctx context.Context) error {
	p.Primary.Kill()
	p.Link.Close()
	if err := p.Replica.Client().Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promote the replica: %w", err)
	}
	addr := p.Replica.Addr()
	p.current.Store(&addr)
	return nil
}
