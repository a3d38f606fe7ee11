package limiter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCallersFindsEveryIdentity: 40 callers of a policy with identities of every encoded
// form (plain, escaped, a shared empty one) and one too long to read back are found, each
// once, on standalone Redis and across the 3 primaries of a Cluster; another policy's and
// another limit's keys are not; max bounds the answer (truncated); a sharded policy's
// callers come back as the identity its shards split.
func TestCallersFindsEveryIdentity(t *testing.T) {
	_, rdb := standalone(t)
	cl := startClusterT(t)
	crdb := cl.Client()
	t.Cleanup(func() { _ = crdb.Close() })
	for name, l := range map[string]*Limiter{"standalone": newLimiter(t, rdb, Options{}), "cluster": newLimiter(t, crdb, Options{})} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
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
			got, err := l.Callers(ctx, p, 1000)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got.Identities)
			slices.Sort(want)
			if !slices.Equal(got.Identities, want) || got.Truncated || got.Unreadable != 1 {
				t.Fatalf("callers: %q (truncated %v, unreadable %d); want %q, not truncated, 1 unreadable",
					got.Identities, got.Truncated, got.Unreadable, want)
			}
			if got, err := l.Callers(ctx, p, 10); err != nil || len(got.Identities) != 10 || !got.Truncated {
				t.Fatalf("callers at most 10: %d (truncated %v, %v)", len(got.Identities), got.Truncated, err)
			}
			s := shardedPolicy(t, FixedWindow, 3, false, Limit{Name: "global", Requests: 300, Period: 1000 * time.Hour})
			for range 30 {
				mustCheck(t, l, s, Request{Identity: "tenant-x"})
			}
			if got, err := l.Callers(ctx, s, 10); err != nil || !slices.Equal(got.Identities, []string{"tenant-x"}) {
				t.Fatalf("a sharded policy's callers: %q (%v); want tenant-x once", got.Identities, err)
			}
		})
	}
}
