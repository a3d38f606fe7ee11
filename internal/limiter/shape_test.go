package limiter

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

// Issue 25, item 2: a preloaded script looped as long as its ARGV said (one EVALSHA of the
// lease script with 1.5 million "limits" held Redis's single thread for 1.55 s). Every
// script must refuse, before any loop, a KEYS/ARGV shape it was not written for, so that
// the O(1)/O(n <= 8) bound in its header holds against a hostile caller too.

// hostileShape is one call of a shape no limiter sends.
type hostileShape struct {
	name string
	keys []string
	args []any
}

// shapeLimits are n limits of ARGV (10 per minute each).
func shapeLimits(n int) []any {
	out := make([]any, 0, 2*n)
	for range n {
		out = append(out, "10", "60000000")
	}
	return out
}

// shapeKeys are n keys under tag.
func shapeKeys(tag string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", tag, i)
	}
	return out
}

// checkShapes are calls of the check scripts with shapes they were not written for.
func checkShapes(tag string) []hostileShape {
	limits := shapeLimits
	keys := func(n int) []string { return shapeKeys(tag, n) }
	base := []any{"1", "60000", "0"}
	idem := []any{"1", "60000", "60000", strings.Repeat("f", 16), "3"}
	return []hostileShape{
		{"nine limits", keys(9), append(base, limits(9)...)},
		{"a hundred thousand limits", keys(100000), append(base, limits(100000)...)},
		{"more limits than keys", keys(1), append(base, limits(2)...)},
		{"more keys than limits", keys(3), append(base, limits(1)...)},
		{"one limit and two keys", keys(2), append(base, limits(1)...)},
		{"no limit", keys(1), base},
		{"half a limit", keys(1), append(base, "10")},
		{"idempotent without its key", keys(1), append(idem, limits(1)...)},
		{"a fingerprint of 1 MiB", keys(2), append([]any{"1", "60000", "60000", strings.Repeat("f", 1<<20), "3"}, limits(1)...)},
	}
}

// leaseShapes are calls of the lease scripts with shapes they were not written for.
func leaseShapes(tag string) []hostileShape {
	limits := shapeLimits
	keys := func(n int) []string { return shapeKeys(tag, n) }
	head := func(prev, share string) []any { return []any{"5", "60000", "2", prev, share} }
	return []hostileShape{
		{"nine limits", keys(10), append(head("-1", "4"), limits(9)...)},
		{"a hundred thousand limits", keys(100001), append(head("-1", "4"), limits(100000)...)},
		{"a previous lease without its record", keys(2), append(head("0", "4"), limits(1)...)},
		{"a record too many", keys(3), append(head("-1", "4"), limits(1)...)},
		{"a share of 0", keys(2), append(head("-1", "0"), limits(1)...)},
		{"no limit", keys(1), head("-1", "4")},
	}
}

// peekShapes are calls a check script takes and a peek script must not: it records nothing,
// so it takes no idempotency key, and it decides a whole cost of 0 or more.
func peekShapes(tag string) []hostileShape {
	keys := func(n int) []string { return shapeKeys(tag, n) }
	idem := []any{"1", "60000", "60000", strings.Repeat("f", 16), "3"}
	return []hostileShape{
		{"an idempotency key", keys(2), append(idem, shapeLimits(1)...)},
		{"a negative cost", keys(1), append([]any{"-1", "60000", "0"}, shapeLimits(1)...)},
		{"a cost that is no number", keys(1), append([]any{"nan", "60000", "0"}, shapeLimits(1)...)},
		{"a fractional cost", keys(1), append([]any{"1.5", "60000", "0"}, shapeLimits(1)...)},
	}
}

// acquireShapes are calls of the acquire scripts with shapes they were not written for.
func acquireShapes(tag string) []hostileShape {
	limits := shapeLimits
	keys := func(n int) []string { return shapeKeys(tag, n) }
	head := func(cost, most, life string) []any { return []any{cost, "60000", most, life} }
	ok := func() []any { return head("1", "5", "60000") }
	return []hostileShape{
		{"nine limits", keys(11), append(ok(), limits(9)...)},
		{"a hundred thousand limits", keys(100002), append(ok(), limits(100000)...)},
		{"no slot key", keys(2), append(ok(), limits(1)...)},
		{"no slots key", keys(1), append(ok(), limits(1)...)},
		{"no limit", keys(2), ok()},
		{"a cost of 0", keys(3), append(head("0", "5", "60000"), limits(1)...)},
		{"no slot at all", keys(3), append(head("1", "0", "60000"), limits(1)...)},
		{"1001 slots", keys(3), append(head("1", "1001", "60000"), limits(1)...)},
		{"a slot ttl under 1 s", keys(3), append(head("1", "5", "999"), limits(1)...)},
		{"a slot ttl over a day", keys(3), append(head("1", "5", "86400001"), limits(1)...)},
	}
}

// sharedShapes are calls of the shared check scripts (scripts.Checks) with shapes they were
// not written for: refused whole, before any check runs.
func sharedShapes(tag string) []hostileShape {
	keys := func(n int) []string { return shapeKeys(tag, n) }
	one := append([]any{"1", "60000", "0"}, shapeLimits(1)...) // a check of one limit: 5 arguments
	carry := func(m int, head ...any) []any {
		out := []any{strconv.Itoa(m)}
		for range m {
			out = append(out, head...)
			out = append(out, one...)
		}
		return out
	}
	return []hostileShape{
		{"no check", nil, []any{"0"}},
		{"129 checks", keys(129), carry(129, "1", "5")},
		{"a check of no key", keys(1), carry(1, "0", "5")},
		{"a check of ten keys", keys(10), carry(1, "10", "5")},
		{"a check of 23 arguments", keys(1), carry(1, "1", "23")},
		{"counts past ARGV", keys(2), carry(2, "1", "6")},
		{"keys left over", keys(3), carry(2, "1", "5")},
		{"a count that is no number", keys(1), carry(1, "x", "5")},
	}
}

// releaseShapes are calls of the release script with shapes it was not written for.
func releaseShapes(tag string) []hostileShape {
	keys := func(n int) []string { return shapeKeys(tag, n) }
	return []hostileShape{
		{"no key", nil, nil},
		{"one key", keys(1), nil},
		{"three keys", keys(3), nil},
		{"a slot id argument", keys(2), []any{strings.Repeat("s", SlotIDLength)}},
		{"an argument of 1 MiB", keys(2), []any{strings.Repeat("s", 1<<20)}},
	}
}

// reserveShapes are calls of the reserve script with shapes it was not written for.
func reserveShapes(tag string) []hostileShape {
	keys := func(n int) []string { return shapeKeys(tag, n) }
	return []hostileShape{
		{"no key", nil, []any{"1", "0", "60000"}},
		{"two keys", keys(2), []any{"1", "0", "60000"}},
		{"no life", keys(1), []any{"1", "0"}},
		{"a cost of 0", keys(1), []any{"0", "0", "60000"}},
		{"a cost beyond 2^40", keys(1), []any{"1099511627777", "0", "60000"}},
		{"a fractional cost", keys(1), []any{"1.5", "0", "60000"}},
		{"a negative since", keys(1), []any{"1", "-1", "60000"}},
		{"a life under 1 s", keys(1), []any{"1", "0", "999"}},
		{"a life over a day", keys(1), []any{"1", "0", "86400001"}},
	}
}

// adjustShapes are calls of the adjustment scripts with shapes they were not written for.
func adjustShapes(tag string) []hostileShape {
	limits := shapeLimits
	keys := func(n int) []string { return shapeKeys(tag, n) }
	fp := strings.Repeat("f", 16)
	head := func(amount, op string) []any { return []any{amount, "60000", "60000", fp, op} }
	return []hostileShape{
		{"nine limits", keys(10), append(head("1", "grant"), limits(9)...)},
		{"a hundred thousand limits", keys(100001), append(head("1", "grant"), limits(100000)...)},
		{"no record key", keys(1), append(head("1", "grant"), limits(1)...)},
		{"no limit", keys(1), head("1", "grant")},
		{"an unknown op", keys(2), append(head("1", "give"), limits(1)...)},
		{"a charge, which only a settlement makes", keys(2), append(head("1", "charge"), limits(1)...)},
		{"an unreserve, which only a settlement makes", keys(2), append(head("1", "unreserve"), limits(1)...)},
		{"a grant of 0", keys(2), append(head("0", "grant"), limits(1)...)},
		{"a negative refund", keys(2), append(head("-5", "refund"), limits(1)...)},
		{"a fractional grant", keys(2), append(head("1.5", "grant"), limits(1)...)},
		{"a grant beyond 2^40", keys(2), append(head("1099511627777", "grant"), limits(1)...)},
		{"a reset with an amount", keys(2), append(head("3", "reset"), limits(1)...)},
		{"a short fingerprint", keys(2), append([]any{"1", "60000", "60000", "f", "grant"}, limits(1)...)},
		{"a record ttl of 0", keys(2), append([]any{"1", "60000", "0", fp, "grant"}, limits(1)...)},
		{"a negative settlement", keys(2), append(head("-1", "settle"), limits(1)...)},
		{"a settlement beyond 2^40", keys(2), append(head("1099511627777", "settle"), limits(1)...)},
	}
}

// shapesOf are the hostile shapes of s's family, its keys under tag.
func shapesOf(s *Script, tag string) []hostileShape {
	switch s.Family {
	case scripts.Check:
		return checkShapes(tag)
	case scripts.Checks:
		return sharedShapes(tag)
	case scripts.Lease:
		return leaseShapes(tag)
	case scripts.Peek:
		// One key more than limits is a peek's shape for a policy with a concurrency limit
		// (its slots, read-only and bounded): not hostile.
		shapes := slices.DeleteFunc(checkShapes(tag), func(h hostileShape) bool { return h.name == "one limit and two keys" })
		return append(shapes, peekShapes(tag)...)
	case scripts.Adjust:
		return adjustShapes(tag)
	case scripts.Acquire:
		return acquireShapes(tag)
	case scripts.Release:
		return releaseShapes(tag)
	case scripts.Reserve:
		return reserveShapes(tag)
	}
	return nil
}

// TestScriptsRefuseShapesTheyWereNotWrittenFor sends every script (AllScripts: checks,
// leases, peeks, adjustments, acquires, release, reserve) calls of hostile shapes and requires each refused with the
// scripts' own ERR reply, with no key written. Before the fix the scripts ran them: nine
// limits were checked and debited, a hundred thousand looped, mismatched counts read and
// wrote past KEYS.
func TestScriptsRefuseShapesTheyWereNotWrittenFor(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := context.Background()
	if err := srv.Client().ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range AllScripts() {
		shapes := shapesOf(s, "{shape:"+s.Name+"}")
		if len(shapes) == 0 {
			t.Errorf("%s: no hostile shapes for its family %q", s.Name, s.Family)
		}
		for _, h := range shapes {
			err := evalShape(ctx, rdb, s, h)
			if err == nil || !strings.HasPrefix(err.Error(), "ERR ratelimit: refused") {
				t.Errorf("%s, %s: got %v; want the script's refusal (ERR ratelimit: refused ...)", s.Name, h.name, err)
			}
		}
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("refused calls wrote %d keys (%v); want none", n, err)
	}
	logSlowest(ctx, t, srv.Client())
}

// evalShape sends one hostile call with EVALSHA (EVAL after NOSCRIPT), as any holder of
// the credentials may.
func evalShape(ctx context.Context, rdb redis.UniversalClient, s *Script, h hostileShape) error {
	_, err := evalOne(ctx, rdb, s, h.keys, h.args)
	return err
}

// logSlowest logs the longest script call Redis recorded (SLOWLOG), for the note: what a
// refused call of a hundred thousand limits still costs is Redis building KEYS and ARGV.
func logSlowest(ctx context.Context, t *testing.T, c *redis.Client) {
	t.Helper()
	logs, err := c.SlowLogGet(ctx, 128).Result()
	if err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	var what string
	for _, l := range logs {
		if l.Duration > slowest && len(l.Args) > 0 && strings.HasPrefix(strings.ToLower(l.Args[0]), "eval") {
			slowest, what = l.Duration, l.Args[0]+" with "+strconv.Itoa(len(l.Args))+" shown arguments"
		}
	}
	t.Logf("slowest script call: %s (%s)", slowest, what)
}
