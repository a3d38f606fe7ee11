package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// TestClusterBatchRedirectsDoNotWaitForStalledNode: one pipeline worker's batch holds a call
// for a stalled primary A (CLIENT PAUSE) and a call whose slot moved from B to C behind the
// client's back. B answers MOVED at once; the redirected call must go to C at once and be
// decided there, not wait for A until the batch's deadline and fail with it (a failure that
// Check would count against B's breaker, a healthy node's).
func TestClusterBatchRedirectsDoNotWaitForStalledNode(t *testing.T) {
	cluster := startClusterT(t)
	cc := ceClusterClient(t, cluster, "", "")
	p := cePolicy(t, "batch", testTemplate)
	stalled := cfIdentities(p, "a", 1, cfPrimarySlots(0))[0]
	moved := cfIdentities(p, "b", 1, cfPrimarySlots(1))[0]
	l := newLimiter(t, cc, Options{Timeout: 5 * time.Second})
	mustCheck(t, l, p, Request{Identity: stalled}) // the slot map is loaded
	primaries := cluster.Primaries()
	cfMigrateSlot(t, keylayout.Slot(p.Keys(moved, "")[0]), primaries[1], primaries[2], primaries)
	if err := primaries[0].Client().Do(context.Background(), "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a := newCall(p.script, p.Keys(stalled, ""), p.Args(Request{Cost: 1}))
	b := newCall(p.script, p.Keys(moved, ""), p.Args(Request{Cost: 1}))
	start := time.Now()
	done := make(chan time.Duration, 1)
	go func() {
		res := <-b.done
		done <- time.Since(start)
		if res.err != nil {
			t.Errorf("the redirected call failed: %v", res.err)
		} else if _, err := decodeReply(p, res.val); err != nil {
			t.Errorf("the redirected call: %v", err)
		}
	}()
	evalBatch(ctx, cc, []*call{a, b})
	took := <-done
	res := <-a.done
	t.Logf("redirected call answered after %s; the stalled primary's call: %v", took.Round(time.Millisecond), res.err)
	if took > 500*time.Millisecond {
		t.Errorf("the redirected call waited %s for the stalled primary's pipeline", took.Round(time.Millisecond))
	}
}
