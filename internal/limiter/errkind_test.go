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
// slot map is stale and which are the call's own; and which replies make the limiter send the
// call again (TRYAGAIN, CLUSTERDOWN), while go-redis may never resend one on its own.
func TestKindOf(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, tc := range []struct {
		err   error
		kind  ErrorKind
		again bool
	}{
		{io.EOF, KindNode, false},
		{read, KindNode, false},
		{context.DeadlineExceeded, KindNode, false},
		{fmt.Errorf("waiting for redis: %w", context.DeadlineExceeded), KindNode, false},
		{dial, KindNode, false},
		{redis.ErrPoolTimeout, KindNode, false},
		{reply("LOADING Redis is loading the dataset in memory"), KindNode, false},
		{reply("BUSY Redis is busy running a script."), KindNode, false},
		{reply("MASTERDOWN Link with MASTER is down"), KindNode, false},
		{reply("OOM command not allowed when used memory > 'maxmemory'. script: x"), KindNode, false},
		{reply("NOREPLICAS Not enough good replicas to write."), KindNode, false},
		{reply("MISCONF Redis is configured to save RDB snapshots"), KindNode, false},
		{reply("ERR max number of clients reached"), KindNode, false},
		{reply("READONLY You can't write against a read only replica."), KindTopology, false},
		{reply("CLUSTERDOWN Hash slot not served"), KindTopology, true},
		{reply("MOVED 3999 127.0.0.1:6381"), KindTopology, false},
		{reply("ASK 3999 127.0.0.1:6381"), KindTopology, false},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), KindTopology, true},
		{redis.ErrClosed, KindTopology, false},
		{reply("CROSSSLOT Keys in request don't hash to the same slot"), KindCall, false},
		{reply("NOPERM this user has no permissions to access one of the keys used as arguments"), KindCall, false},
		{reply("NOSCRIPT No matching script. Please use EVAL."), KindCall, false},
		{reply("NOAUTH Authentication required."), KindCall, false},
		{reply("WRONGPASS invalid username-password pair"), KindCall, false},
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
		if got := tryAgain(wrapped); got != tc.again {
			t.Errorf("tryAgain(%v) = %v, want %v", tc.err, got, tc.again)
		}
		if !(onceCmd{cmdWithErr(tc.err)}).NoRetry() {
			t.Errorf("NoRetry after %v is false: go-redis could send the script again", tc.err)
		}
	}
	if KindOf(nil) != 0 || tryAgain(nil) {
		t.Errorf("nil: kind %s, tryAgain %v", KindOf(nil), tryAgain(nil))
	}
}

func cmdWithErr(err error) *redis.Cmd {
	c := redis.NewCmd(context.Background(), "evalsha")
	c.SetErr(err)
	return c
}
