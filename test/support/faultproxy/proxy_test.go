package faultproxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/faultproxy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// through returns a client of srv whose connections pass through a proxy, and the proxy. The
// client never retries, so each call is sent once.
func through(t *testing.T, srv *redistest.Server, protocol int) (*redis.Client, *faultproxy.Proxy) {
	t.Helper()
	set := faultproxy.StartSet(t, srv.Addr())
	opts := srv.Options()
	opts.Dialer, opts.MaxRetries, opts.Protocol = set.Dial, -1, protocol
	opts.ReadTimeout = 300 * time.Millisecond
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c, set.Proxy(srv.Addr())
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestPassThrough: without faults the proxy is invisible, over RESP2 and RESP3 (maps, sets,
// doubles, nulls, big strings, pipelines), and it counts what it forwarded.
func TestPassThrough(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, protocol := range []int{2, 3} {
		c, p := through(t, srv, protocol)
		ctx := ctx(t)
		big := strings.Repeat("x", 1<<20)
		if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
			t.Fatalf("RESP%d SET: %v", protocol, err)
		}
		if v, err := c.Get(ctx, "big").Result(); err != nil || v != big {
			t.Fatalf("RESP%d GET big: %d bytes, %v", protocol, len(v), err)
		}
		if err := c.HSet(ctx, "h", "a", 1, "b", 2).Err(); err != nil {
			t.Fatal(err)
		}
		if m, err := c.HGetAll(ctx, "h").Result(); err != nil || m["a"] != "1" || m["b"] != "2" {
			t.Fatalf("RESP%d HGETALL: %v, %v", protocol, m, err)
		}
		if _, err := c.Get(ctx, "missing").Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("RESP%d GET missing: %v, want redis.Nil", protocol, err)
		}
		cmds, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for range 100 {
				pipe.Incr(ctx, "n")
			}
			pipe.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "m"})
			pipe.ZScore(ctx, "z", "m")
			return nil
		})
		if err != nil {
			t.Fatalf("RESP%d pipeline: %v", protocol, err)
		}
		if got := cmds[99].(*redis.IntCmd).Val(); got%100 != 0 {
			t.Fatalf("RESP%d pipeline: 100th INCR = %d", protocol, got)
		}
		if got := cmds[101].(*redis.FloatCmd).Val(); got != 1.5 {
			t.Fatalf("RESP%d ZSCORE = %v", protocol, got)
		}
		if n := p.Forwarded("incr"); n != 100 {
			t.Fatalf("RESP%d: proxy forwarded %d INCR, want 100", protocol, n)
		}
	}
}

// TestFaults: each action breaks exactly the selected commands, as many as Count, and Redis
// itself shows whether the command ran: not for DropBefore, once for DropAfter and Delay.
func TestFaults(t *testing.T) {
	srv := redistest.StartServer(t)
	direct := srv.Client()
	for _, tc := range []struct {
		action faultproxy.Action
		ran    int64 // how often the broken INCR ran in Redis
		isErr  func(error) bool
	}{
		{faultproxy.DropBefore, 0, isEOF},
		{faultproxy.DropAfter, 1, isEOF},
		{faultproxy.Delay, 1, isTimeout},
	} {
		t.Run(tc.action.String(), func(t *testing.T) {
			c, p := through(t, srv, 3)
			ctx := ctx(t)
			key := "n:" + tc.action.String()
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("PING: %v", err)
			}
			p.Inject(faultproxy.Fault{Action: tc.action, Commands: []string{"incr"}, Count: 2, Delay: time.Second})
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("PING is not selected by the fault: %v", err)
			}
			for i := range 2 {
				if err := c.Incr(ctx, key).Err(); !tc.isErr(err) {
					t.Fatalf("broken INCR %d: %v", i, err)
				}
			}
			if got := direct.Get(ctx, key).Val(); got != stored(2*tc.ran) {
				t.Fatalf("after 2 broken INCRs Redis holds %q, want %d", got, 2*tc.ran)
			}
			if n, err := c.Incr(ctx, key).Result(); err != nil || n != 2*tc.ran+1 {
				t.Fatalf("INCR after the fault is spent: %d, %v; want %d", n, err, 2*tc.ran+1)
			}
			if p.Hits() != 2 || p.Forwarded("INCR") != int(2*tc.ran+1) {
				t.Fatalf("hits %d, forwarded %d INCR; want 2 and %d", p.Hits(), p.Forwarded("INCR"), 2*tc.ran+1)
			}
		})
	}
}

// TestFaultInPipeline: a fault selected by its key breaks that command of a pipeline and
// drops the rest of the pipeline too: the commands before it ran (go-redis then fails the whole pipeline with the connection's
// error), the broken one ran, the ones after it never reached Redis.
func TestFaultInPipeline(t *testing.T) {
	srv := redistest.StartServer(t)
	c, p := through(t, srv, 3)
	ctx := ctx(t)
	p.Inject(faultproxy.Fault{Action: faultproxy.DropAfter, Commands: []string{"INCR"}, Arg: "b", Count: 1})
	cmds, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Incr(ctx, "a")
		pipe.Incr(ctx, "b")
		pipe.Incr(ctx, "a")
		return nil
	})
	if !isEOF(err) || !isEOF(cmds[2].Err()) {
		t.Fatalf("pipeline: %v, last command: %v; want EOF", err, cmds[2].Err())
	}
	a, b := srv.Client().Get(ctx, "a").Val(), srv.Client().Get(ctx, "b").Val()
	if a != "1" || b != "1" {
		t.Fatalf("Redis holds a=%q b=%q, want 1 and 1 (INCR a and INCR b ran, the last INCR a never arrived)", a, b)
	}
	if n := p.Forwarded("incr"); n != 2 {
		t.Fatalf("forwarded %d INCR, want 2", n)
	}
}

// TestSetRoutesByTarget: a Set's dialer sends each address to its own proxy and leaves
// addresses without one alone; closed proxies refuse connections.
func TestSetRoutesByTarget(t *testing.T) {
	a, b := redistest.StartServer(t), redistest.StartServer(t)
	set := faultproxy.StartSet(t, a.Addr())
	ctx := ctx(t)
	for _, srv := range []*redistest.Server{a, b} {
		opts := srv.Options()
		opts.Dialer, opts.MaxRetries = set.Dial, -1
		c := redis.NewClient(opts)
		if err := c.Set(ctx, "k", srv.Addr(), 0).Err(); err != nil {
			t.Fatalf("SET via %s: %v", srv.Addr(), err)
		}
		_ = c.Close()
		if got := srv.Client().Get(ctx, "k").Val(); got != srv.Addr() {
			t.Fatalf("%s holds %q", srv.Addr(), got)
		}
	}
	if n := set.Proxy(a.Addr()).Forwarded("set"); n != 1 {
		t.Fatalf("proxy of %s forwarded %d SET, want 1", a.Addr(), n)
	}
	if set.Proxy(b.Addr()) != nil {
		t.Fatalf("a proxy for %s that was never started", b.Addr())
	}
	p := set.Proxy(a.Addr())
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = conn.Close()
		t.Fatalf("a closed proxy accepted a connection")
	}
}

func isEOF(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset"))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// stored is what GET answers for a counter incremented n times ("" for a missing key).
func stored(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}
