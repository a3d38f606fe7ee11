package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leases through a failover. Redis replicates asynchronously: a primary that dies just after
// granting a lease can leave a replica, promoted in its place, that never saw the debit and
// hands the same units out again (measured before this: a limit of 100 admitted 125 with a
// lease of 25, 101 without leases). So a lease is spent only once every replica of its
// primary holds it. The lease call travels in one round trip with ROLE before it (the
// replicas connected to the primary) and WAIT after it (how many replicas have acknowledged
// everything this connection wrote, waiting at most AckTimeout). Units that not every
// replica acknowledged are held, never spent, and returned by the identity's next lease
// call. Sentinel and Cluster promote a replica that was connected to the primary, so the
// promoted replica holds every unit this process spends from a lease: leases add nothing to
// what a failover can lose. What remains is what any write can lose, with or without
// leases: the checks decided one by one by Redis in the replication lag before the primary
// died.

// leaseNode is the client of one primary (or of the one server) a lease call goes to.
type leaseNode interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// errUnacknowledged says a lease's units are held: not every replica acknowledged them.
var errUnacknowledged = errors.New("lease not acknowledged by every replica")

// leaseRound is what one lease call's round trip answered.
type leaseRound struct {
	// val and err are the script's reply.
	val any
	err error
	// acked is true when every replica connected to the primary acknowledged the call.
	acked bool
	// cause says why acked is false.
	cause error
}

// leaseRoundTrip runs a lease script call with ROLE before it and WAIT (up to ack) after
// it, on the primary that owns the keys (EVAL after NOSCRIPT, for the EVALSHA flavour).
func (l *Limiter) leaseRoundTrip(ctx context.Context, s *Script, keys []string, args []any, ack time.Duration) leaseRound {
	node, addr, err := l.primaryFor(ctx, keys[0])
	if err != nil {
		return leaseRound{err: err}
	}
	n, err := l.replicaCount(ctx, node, addr)
	if err != nil {
		return leaseRound{err: err}
	}
	r := l.leaseRoundOn(ctx, node, addr, s.evalSHA(ctx, keys, args), n, ack)
	if isNoScript(r.err) && !s.fcall {
		r = l.leaseRoundOn(ctx, node, addr, s.eval(ctx, keys, args), n, ack)
	}
	return r
}

// primaryFor is the client of the primary that owns key, and its address as the key of the
// replica count: the Cluster node, or the one client of a standalone or Sentinel setup.
func (l *Limiter) primaryFor(ctx context.Context, key string) (leaseNode, string, error) {
	if l.primaries == nil {
		return l.rdb, "", nil
	}
	node, err := l.primaries.cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("primary for %q: %w", key, err)
	}
	return node, node.Options().Addr, nil
}

// replicaCount is the replica count the primary at addr gave last, asked with ROLE on
// first use: WAIT must know how many replicas to wait for before the first lease call.
// A ROLE the primary refused (the user lacks +role) counts 0 here; the round trip's own
// ROLE fails the same way, and its lease is held, never spent.
func (l *Limiter) replicaCount(ctx context.Context, node leaseNode, addr string) (int64, error) {
	if n, ok := l.replicas.Load(addr); ok {
		return n.(int64), nil //nolint:forcetypeassert // only int64 is stored
	}
	n, err := connectedReplicas(node.Do(ctx, "ROLE"))
	if _, reply := replyKind(err); err != nil && !reply {
		return 0, err
	}
	if err != nil {
		return 0, nil
	}
	l.replicas.Store(addr, n)
	return n, nil
}

// leaseRoundOn sends ROLE, the script call cmd and WAIT for want replicas (up to ack) in one
// pipeline on node, and remembers the replica count ROLE gave for the next call.
func (l *Limiter) leaseRoundOn(ctx context.Context, node leaseNode, addr string, cmd *redis.Cmd, want int64, ack time.Duration) leaseRound {
	var role, wait *redis.Cmd
	_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		role = p.Do(ctx, "ROLE")
		send(ctx, p, cmd)
		wait = p.Do(ctx, "WAIT", want, ack.Milliseconds())
		return nil
	})
	r := leaseRound{}
	r.val, r.err = cmd.Result()
	if r.err != nil {
		return r
	}
	replicas, err := connectedReplicas(role)
	if err != nil {
		r.cause = err
		return r
	}
	l.replicas.Store(addr, replicas)
	acks, err := wait.Int64()
	switch {
	case err != nil:
		r.cause = fmt.Errorf("WAIT: %w", err)
	case acks < replicas:
		r.cause = fmt.Errorf("%w: %d of %d within %s", errUnacknowledged, acks, replicas, ack)
	default:
		r.acked = true
	}
	return r
}

// connectedReplicas is the number of replicas a ROLE reply lists for a primary.
func connectedReplicas(role *redis.Cmd) (int64, error) {
	v, err := role.Slice()
	if err != nil {
		return 0, fmt.Errorf("ROLE: %w", err)
	}
	if len(v) != 3 || v[0] != "master" {
		return 0, fmt.Errorf("ROLE: not a primary: %v", v)
	}
	replicas, ok := v[2].([]any)
	if !ok {
		return 0, fmt.Errorf("ROLE: replica list is %T", v[2])
	}
	return int64(len(replicas)), nil
}

// defaultAckTimeout is how long WAIT waits for the replicas to acknowledge a lease.
const defaultAckTimeout = 20 * time.Millisecond
