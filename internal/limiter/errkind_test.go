package limiter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// reply is a Redis error reply as go-redis returns it (anything with a RedisError method).
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// TestKindOf pins the classification table: which errors count against a node, which say the
// slot map is stale, which are the call's own, and which prove the script had no effect.
func TestKindOf(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, tc := range []struct {
		err    error
		kind   ErrorKind
		notRun bool
	}{
		{io.EOF, KindNode, false},
		{read, KindNode, false},
		{context.DeadlineExceeded, KindNode, false},
		{fmt.Errorf("waiting for redis: %w", context.DeadlineExceeded), KindNode, false},
		{dial, KindNode, true},
		{redis.ErrPoolTimeout, KindNode, true},
		{reply("LOADING Redis is loading the dataset in memory"), KindNode, true},
		{reply("BUSY Redis is busy running a script."), KindNode, true},
		{reply("MASTERDOWN Link with MASTER is down"), KindNode, true},
		{reply("OOM command not allowed when used memory > 'maxmemory'. script: x"), KindNode, true},
		{reply("NOREPLICAS Not enough good replicas to write."), KindNode, true},
		{reply("MISCONF Redis is configured to save RDB snapshots"), KindNode, true},
		{reply("ERR max number of clients reached"), KindNode, true},
		{reply("READONLY You can't write against a read only replica."), KindTopology, true},
		{reply("CLUSTERDOWN Hash slot not served"), KindTopology, true},
		{reply("MOVED 3999 127.0.0.1:6381"), KindTopology, true},
		{reply("ASK 3999 127.0.0.1:6381"), KindTopology, true},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), KindTopology, true},
		{redis.ErrClosed, KindTopology, true},
		{reply("CROSSSLOT Keys in request don't hash to the same slot"), KindCall, true},
		{reply("NOPERM this user has no permissions to access one of the keys used as arguments"), KindCall, true},
		{reply("NOSCRIPT No matching script. Please use EVAL."), KindCall, true},
		{reply("NOAUTH Authentication required."), KindCall, true},
		{reply("WRONGPASS invalid username-password pair"), KindCall, true},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), KindCall, false},
		{reply("ERR Error running script (call to f_x): @user_script:1: oops"), KindCall, false},
		{reply("ERR The user executing the script can't access at least one of the keys"), KindCall, false},
		{reply("SOMETHINGNEW the node answered"), KindCall, false},
		{fmt.Errorf("%w: script x: unexpected reply", errBadReply), KindCall, false},
		{ErrCircuitOpen, KindNode, false},
		{ErrOverloaded, KindLocal, false},
		{context.Canceled, KindLocal, false},
	} {
		wrapped := fmt.Errorf("policy ns/p: %w", tc.err)
		if got := KindOf(wrapped); got != tc.kind {
			t.Errorf("KindOf(%v) = %s, want %s", tc.err, got, tc.kind)
		}
		if got := notRun(wrapped); got != tc.notRun {
			t.Errorf("notRun(%v) = %v, want %v", tc.err, got, tc.notRun)
		}
		if got, want := (onceCmd{cmdWithErr(tc.err)}).NoRetry(), !tc.notRun; got != want {
			t.Errorf("NoRetry after %v = %v, want %v", tc.err, got, want)
		}
	}
	if KindOf(nil) != 0 || notRun(nil) || (onceCmd{cmdWithErr(nil)}).NoRetry() != true {
		t.Errorf("nil: kind %s, notRun %v", KindOf(nil), notRun(nil))
	}
}

func cmdWithErr(err error) *redis.Cmd {
	c := redis.NewCmd(context.Background(), "evalsha")
	c.SetErr(err)
	return c
}
