package envoyrls

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// TestPendingEndsAreBounded: a client sending stream starts it never ends cannot grow the
// table past MaxPending (the oldest are forgotten), nor one request id past maxPerKey; the
// newest are still there; an expired admission is not returned.
func TestPendingEndsAreBounded(t *testing.T) {
	var p pendingEnds
	now := time.Now()
	r := &engine.Rule{}
	for i := range MaxPending + 500 {
		p.put(fmt.Sprint(i), engine.Outcome{Rule: r}, now)
		if i%3 == 0 {
			p.take(fmt.Sprint(i), now) // ended: the order keeps a stale key
		}
	}
	if p.n > MaxPending || len(p.m) > MaxPending || len(p.order) > 2*MaxPending+1 {
		t.Fatalf("%d held, %d keys, %d in order: want at most %d", p.n, len(p.m), len(p.order), MaxPending)
	}
	if _, ok := p.take(fmt.Sprint(MaxPending+499), now); !ok {
		t.Fatal("the newest admission was forgotten")
	}
	for range 2 * maxPerKey {
		p.put("same", engine.Outcome{Rule: r}, now)
	}
	if got := len(p.m["same"]); got != maxPerKey {
		t.Fatalf("%d under one request id, want %d", got, maxPerKey)
	}
	p.put("late", engine.Outcome{Rule: r}, now.Add(-2*pendingLife))
	if _, ok := p.take("late", now); ok {
		t.Fatal("an expired admission was returned")
	}
}
