package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCallersFindsEveryIdentity: 40 callers of a policy with identities of every encoded
// form (plain, escaped, a shared empty one) and one too long to read back are found, each
// once, by steps from the zero position until Done, on standalone Redis and across the 3
// primaries of a Cluster; another policy's and another limit's keys are not; a sharded
// policy's callers come back as the identity its shards split.
func TestCallersFindsEveryIdentity(t *testing.T) {
	_, rdb := standalone(t)
	cl := startClusterT(t)
	crdb := cl.Client()
	t.Cleanup(func() { _ = crdb.Close() })
	for name, l := range map[string]*Limiter{"standalone": newLimiter(t, rdb, Options{}), "cluster": newLimiter(t, crdb, Options{})} {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, FixedWindow, FailClosed, perHour("hour", 5), perHour("hour2", 9))
			other := newPolicy(t, FixedWindow, FailClosed, perHour("hour", 5))
			var want []string
			for i := range 37 {
				want = append(want, fmt.Sprintf("caller-%d", i))
			}
			want = append(want, "a b:{c}", "ü", "")
			for _, id := range append(want, strings.Repeat("x", 300)) {
				mustCheck(t, l, p, Request{Identity: id})
				mustCheck(t, l, other, Request{Identity: "not-" + id})
			}
			got, unreadable, steps := allCallers(t, l, p, 7)
			slices.Sort(want)
			if !slices.Equal(got, want) || unreadable != 1 {
				t.Fatalf("callers: %q (unreadable %d); want %q, 1 unreadable", got, unreadable, want)
			}
			if steps < 2 {
				t.Fatalf("%d steps of COUNT 7 over 240 keys; want several", steps)
			}
			s := shardedPolicy(t, FixedWindow, 3, false, Limit{Name: "global", Requests: 300, Period: 1000 * time.Hour})
			for range 30 {
				mustCheck(t, l, s, Request{Identity: "tenant-x"})
			}
			if got, _, _ := allCallers(t, l, s, 100); !slices.Equal(got, []string{"tenant-x"}) {
				t.Fatalf("a sharded policy's callers: %q; want tenant-x once", got)
			}
			if s.PeekCalls() != 3 || p.PeekCalls() != 1 {
				t.Fatalf("peek calls: sharded %d, plain %d; want 3 and 1", s.PeekCalls(), p.PeekCalls())
			}
			keys := int64(0)
			for _, c := range primaryClientsT(t, l) {
				keys += c.DBSize(context.Background()).Val()
			}
			if n, err := l.KeyCount(context.Background()); err != nil || n != keys || n < 3*41 {
				t.Fatalf("key count: %d, %v; want DBSIZE over the primaries, %d", n, err, keys)
			}
		})
	}
}

// TestCallersStepPositionIsHarmless: a position is only a place in the keyspace. One naming
// a primary Redis does not have is refused (ErrScanPosition); any cursor on a primary it has,
// whatever its value, reads the policy's own callers and no one else's.
func TestCallersStepPositionIsHarmless(t *testing.T) {
	_, rdb := standalone(t)
	l := newLimiter(t, rdb, Options{})
	p := newPolicy(t, FixedWindow, FailClosed, perHour("hour", 5))
	other := newPolicy(t, FixedWindow, FailClosed, perHour("hour", 5))
	for i := range 50 {
		mustCheck(t, l, p, Request{Identity: fmt.Sprintf("own-%d", i)})
		mustCheck(t, l, other, Request{Identity: fmt.Sprintf("foreign-%d", i)})
	}
	ctx := context.Background()
	for _, at := range []ScanPosition{{Primary: 1}, {Primary: -1}, {Primary: math.MaxInt, Cursor: 5}} {
		if _, err := l.CallersStep(ctx, p, at, 10); !errors.Is(err, ErrScanPosition) {
			t.Errorf("position %+v on standalone: %v, want ErrScanPosition", at, err)
		}
	}
	for _, cursor := range []uint64{1, 12345, 1 << 40, math.MaxUint64} {
		at := ScanPosition{Cursor: cursor}
		for range 20 {
			step, err := l.CallersStep(ctx, p, at, 10)
			if err != nil {
				t.Fatalf("cursor %d: %v", cursor, err)
			}
			for _, id := range step.Identities {
				if !strings.HasPrefix(id, "own-") {
					t.Fatalf("cursor %d read %q, not a caller of the policy", cursor, id)
				}
			}
			if step.Done {
				break
			}
			at = step.Next
		}
	}
}

// primaryClientsT are l's primaries' clients.
func primaryClientsT(t *testing.T, l *Limiter) []*redis.Client {
	t.Helper()
	nodes, err := l.primaryClients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// TestKeysOf: INFO keyspace's keys of the database asked for, 0 when it is not listed.
func TestKeysOf(t *testing.T) {
	info := "# Keyspace\r\ndb0:keys=1000022,expires=22,avg_ttl=59000\r\ndb3:keys=7,expires=0,avg_ttl=0\r\n"
	for db, want := range map[int]int64{0: 1000022, 3: 7, 1: 0, 30: 0} {
		if n, err := keysOf(info, db); err != nil || n != want {
			t.Errorf("db%d: %d, %v; want %d", db, n, err, want)
		}
	}
	if _, err := keysOf("db0:keys=x,expires=0", 0); err == nil {
		t.Error("keys=x: no error")
	}
}

// allCallers lists p's callers by steps of count from the zero position until Done, sorted
// and each once, with the unreadable keys and the steps taken.
func allCallers(t *testing.T, l *Limiter, p *Policy, count int) (ids []string, unreadable, steps int) {
	t.Helper()
	seen := map[string]bool{}
	at := ScanPosition{}
	for {
		step, err := l.CallersStep(context.Background(), p, at, count)
		if err != nil {
			t.Fatal(err)
		}
		steps++
		unreadable += step.Unreadable
		for _, id := range step.Identities {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if step.Done {
			slices.Sort(ids)
			return ids, unreadable, steps
		}
		if steps > 10_000 {
			t.Fatal("no end after 10,000 steps")
		}
		at = step.Next
	}
}
