package limiter

import "sync/atomic"

// ErrorStats count the checks since New that Redis did not decide, by why: the kind of the
// Redis error (see ErrorKind), or the open circuit breaker of the node that serves the
// check's keys. Each is a monotonic counter, ready to be exported as one.
type ErrorStats struct {
	// Node counts errors that count against a node's health: no reply in time, or a node
	// that cannot serve anyone (LOADING, BUSY, OOM, ...).
	Node uint64
	// Topology counts replies saying the slot map is stale (CLUSTERDOWN, MOVED, ASK, TRYAGAIN,
	// READONLY once go-redis gave up following them).
	Topology uint64
	// Call counts errors that are the call's or its policy's own fault (CROSSSLOT, NOPERM,
	// script errors, ...).
	Call uint64
	// Local counts checks decided in this process: a full pipeline queue, or a caller that
	// went away before Redis answered.
	Local uint64
	// CircuitOpen counts checks refused by an open circuit breaker without asking Redis.
	CircuitOpen uint64
}

// errorStats is the Limiter's live ErrorStats.
type errorStats struct {
	node, topology, call, local, circuitOpen atomic.Uint64
}

// count adds one error of kind k.
func (s *errorStats) count(k ErrorKind) {
	switch k {
	case KindNode:
		s.node.Add(1)
	case KindTopology:
		s.topology.Add(1)
	case KindCall:
		s.call.Add(1)
	case KindLocal:
		s.local.Add(1)
	}
}

// ErrorStats returns the counts of checks Redis did not decide since New, by why.
func (l *Limiter) ErrorStats() ErrorStats {
	s := &l.stats
	return ErrorStats{Node: s.node.Load(), Topology: s.topology.Load(), Call: s.call.Load(),
		Local: s.local.Load(), CircuitOpen: s.circuitOpen.Load()}
}
