package limiter

import (
	"fmt"
	"testing"
	"time"
)

// TestTierChangeDownAndBackKeepsDebt: switching down and back must not forgive debt. A pro
// caller (100/day) that used 90 sends one request that selects free (5/day) with the same
// identity (say, without the JWT whose claim selects pro): its 90 tokens of debt do not fit
// free's 5, so it is denied, and the stored value must keep the 90 tokens. Its next request
// as pro has 10 left, not 95: a read that had to cap the debt at the smaller capacity writes
// nothing back. Every path that can deny after such a read: a check on the single-limit path
// (no request id), on the general path (a request id), and a lease; then pro again, reported
// by a check and by a lease of everything. Twice, so that no cycle gains anything. Refill
// is nothing here: the clock stands still.
func TestTierChangeDownAndBackKeepsDebt(t *testing.T) {
	_, rdb := standalone(t)
	now := int64(20_400)*keepDay.Microseconds() + 10*time.Hour.Microseconds()
	ttl := 2*keepDay + time.Hour
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		s, _ := ScriptFor(alg)
		run := &fakeClockRunner{rdb: rdb, src: withFakeClock(s)}
		leases := newLeaseRunner(rdb, alg)
		pro := keepPolicy(t, alg, ttl, Limit{Name: "daily", Requests: 100, Period: keepDay})
		free := keepPolicy(t, alg, ttl, Limit{Name: "daily", Requests: 5, Period: keepDay})
		for _, path := range []string{"check", "check-request-id", "lease"} {
			t.Run(string(alg)+"/"+path, func(t *testing.T) {
				id := "down-and-back-" + path
				run.setNow(t, now)
				spend(t, run, pro, id, 90, 1)
				for cycle := range 2 {
					switch path {
					case "check", "check-request-id":
						rid := ""
						if path == "check-request-id" {
							rid = fmt.Sprintf("free-%d", cycle)
						}
						if _, d := run.check(t, free, id, rid, 1); d.Allowed || d.Remaining != 0 {
							t.Fatalf("cycle %d: 90 used of 100/day, then a request under 5/day: %+v; want denied, 0 left", cycle, d)
						}
					case "lease":
						if r := leases.take(t, free, id, fmt.Sprintf("free-%d", cycle), 2, nil); r.granted != 0 || r.left != 0 {
							t.Fatalf("cycle %d: 90 used of 100/day, then a lease under 5/day: %+v; want nothing granted, 0 left", cycle, r)
						}
					}
					if got := probe(t, run, pro, 0, id); got != 10 {
						t.Fatalf("cycle %d: 90 used of 100/day, one request denied under 5/day, then pro reports %d remaining; want 10 (the debt forgiven otherwise)",
							cycle, got)
					}
				}
				if r := leases.take(t, pro, id, "pro", 1_000, nil); r.granted != 10 || r.left != 0 {
					t.Fatalf("a lease of everything under pro after the round trips: %+v; want 10 granted, 0 left", r)
				}
			})
		}
	}
}
