package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrorKind says what a failed Redis call tells about the node that served it, and so what
// the Limiter does about it. Whatever the kind, the check itself is answered by the policy's
// failure mode.
type ErrorKind uint8

const (
	// KindNode is a node that did not answer in time, or answered that it cannot serve
	// anyone now. It counts against the node's circuit breaker, and on Cluster the slot map
	// is reloaded (the node may have failed over).
	KindNode ErrorKind = iota + 1
	// KindTopology means the node answered, but the slot is elsewhere, moving or unserved: the
	// client's slot map is stale. The node is healthy; the slot map is reloaded.
	KindTopology
	// KindCall is the call's own fault, or its policy's: its keys, script, arguments, or the
	// permissions of the user it runs as. The node is healthy and nothing is reloaded; other
	// policies on the node are unaffected.
	KindCall
	// KindLocal is a check decided in this process without a word from any node (the
	// pipeline queue was full, the caller went away).
	KindLocal
)

// String is the kind's name, a metric label: node, topology, call, local, or none.
func (k ErrorKind) String() string {
	switch k {
	case KindNode:
		return "node"
	case KindTopology:
		return "topology"
	case KindCall:
		return "call"
	case KindLocal:
		return "local"
	default:
		return "none"
	}
}

// replyKinds classifies Redis error replies by their first word. A reply not listed is
// KindCall: the node answered, so it is up, and the reply is about what the call sent. "No
// effect" says whether the reply proves the script changed nothing (it did not run, or
// failed before its first write); only TRYAGAIN and CLUSTERDOWN make the limiter send the
// call again (evalOne), NOSCRIPT makes it send EVAL, and go-redis follows MOVED and ASK.
//
//	reply        kind      no effect  why
//	LOADING      node      yes        loading its data set: serves no one until done; PING says LOADING too
//	BUSY         node      yes        a script ran past busy-reply-threshold: serves no one; PING says BUSY too
//	MASTERDOWN   node      yes        a replica without its primary (replica-serve-stale-data no)
//	OOM          node      yes        out of memory (maxmemory, noeviction): refuses every writer, not one
//	                                  policy; the script fails at its first write, before any effect
//	NOREPLICAS   node      yes        min-replicas-to-write unmet: refuses every writer
//	MISCONF      node      yes        cannot persist (stop-writes-on-bgsave-error): refuses every writer
//	ERR max number of clients reached
//	             node      yes        refused the connection itself
//	READONLY     topology  yes        a replica now: the client wrote to a demoted primary
//	CLUSTERDOWN  topology  yes        the slot is unserved or the cluster is failing over; any node may
//	                                  say so for a slot it does not own (go-redis sends calls for an
//	                                  unknown slot to a random node), so it is no node's fault
//	MOVED, ASK   topology  yes        the slot is on another node; go-redis follows them
//	TRYAGAIN     topology  yes        the slot is migrating and the keys are split between two nodes
//	NOSCRIPT     call      yes        the script is not cached: the limiter sends EVAL once
//	ERR Function not found
//	             call      yes        a function policy's library is not loaded (yet): the manager
//	                                  loads it; the limiter never sends EVAL for a function
//	CROSSSLOT    call      yes        the policy's keys span slots (e.g. an empty hash tag)
//	NOPERM       call      yes        the ACL user may not touch the policy's keys or commands
//	WRONGTYPE    call      -          a key of another type (the scripts read with MGET, so they never do)
//	NOAUTH, WRONGPASS
//	             call      yes        this client's credentials: no node's health
//	ERR ...      call      -          a script error, bad arguments, unknown command: the call's own
//	(others)     call      -
//
// Errors that are not replies: a network error, our own timeout (context deadline), a pool
// timeout or a refused dial are KindNode (no reply, or none in time; after a lost reply
// the script may have run). A client go-redis has closed (it dropped the node from its slot
// map) is KindTopology; the command was never sent. ErrCircuitOpen is KindNode (the node's
// breaker is open), ErrOverloaded and a canceled context KindLocal.
var replyKinds = map[string]ErrorKind{
	"LOADING":     KindNode,
	"BUSY":        KindNode,
	"MASTERDOWN":  KindNode,
	"OOM":         KindNode,
	"NOREPLICAS":  KindNode,
	"MISCONF":     KindNode,
	"READONLY":    KindTopology,
	"CLUSTERDOWN": KindTopology,
	"MOVED":       KindTopology,
	"ASK":         KindTopology,
	"TRYAGAIN":    KindTopology,
	"NOSCRIPT":    KindCall,
	"CROSSSLOT":   KindCall,
	"NOPERM":      KindCall,
	"NOAUTH":      KindCall,
	"WRONGPASS":   KindCall,
}

// maxClients is the one ERR reply about the node rather than the call.
const maxClients = "ERR max number of clients reached"

// errBadReply marks a script reply the limiter cannot decode: the call's fault (a script of
// another version, say), never the node's.
var errBadReply = errors.New("unexpected script reply")

// errSharedReply is the error of the checks a shared call carried when its reply is not one
// reply per check.
var errSharedReply = fmt.Errorf("%w: a shared call's reply is not one per check", errBadReply)

// KindOf classifies an error of a Redis call (see ErrorKind and the table of replyKinds);
// KindOf(nil) is 0.
func KindOf(err error) ErrorKind {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrCircuitOpen):
		return KindNode
	case errors.Is(err, ErrOverloaded), errors.Is(err, context.Canceled):
		return KindLocal
	case errors.Is(err, errBadReply):
		return KindCall
	case errors.Is(err, redis.ErrClosed):
		return KindTopology
	}
	if k, ok := replyKind(err); ok {
		return k
	}
	return KindNode
}

// replyKind looks up a Redis error reply in replyKinds; ok is false for an error that is not
// a reply.
func replyKind(err error) (ErrorKind, bool) {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return 0, false
	}
	msg := reply.Error()
	if strings.HasPrefix(msg, maxClients) {
		return KindNode, true
	}
	word, _, _ := strings.Cut(msg, " ")
	if k, ok := replyKinds[word]; ok {
		return k, true
	}
	return KindCall, true
}

// tryAgain reports a reply after which the same call may be sent again shortly: the script
// did not run, and the slot is mid-migration (TRYAGAIN) or its cluster mid-failover
// (CLUSTERDOWN).
func tryAgain(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "TRYAGAIN") || redis.HasErrorPrefix(err, "CLUSTERDOWN"))
}

// redirected reports a Cluster reply after which the script did not run on this node and
// belongs elsewhere, or on this node later (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, READONLY), or
// a node client go-redis closed before sending: the call is sent again through the cluster
// client, which follows the slot.
func redirected(err error) bool {
	if errors.Is(err, redis.ErrClosed) {
		return true
	}
	k, ok := replyKind(err)
	return ok && k == KindTopology
}
