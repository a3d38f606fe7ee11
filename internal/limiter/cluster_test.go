package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// hostileIdentities returns n distinct identities: hash-tag braces, CRLF, NUL, invalid UTF-8,
// unicode, template syntax, 5 kB strings, then random mixes of those characters.
func hostileIdentities(n int) []string {
	ids := []string{"", "{", "}", "{}", "}{", "{a}", "a{b}c", "{{x}}", "{rl:test/x:y}", "\r\n", "a\r\nb",
		"\r\n{\r\n}", "日本語", "é", "🚦{}", "\x00", "\xff\xfe", "%7B", "#hash", ":", "a:b:c", "${identity}",
		"{${identity}}", strings.Repeat("x", 5000), strings.Repeat("{", 5000), strings.Repeat("é}", 2500),
		strings.Repeat("\r\n", 2500), strings.Repeat("日{本}", 1000)}
	alphabet := []rune("abcXYZ019{}{}:/\r\n\t %#$é日本🚦\x00")
	r := rand.New(rand.NewPCG(42, 43))
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for len(ids) < n {
		length := 1 + r.IntN(40)
		if r.IntN(20) == 0 {
			length = 5000
		}
		var b strings.Builder
		for range length {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		if id := b.String(); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids[:n]
}

// clusterCheck is one identity of one policy, with its request id and keys.
type clusterCheck struct {
	p        *Policy
	identity string
	req      string
	keys     []string
}

// TestClusterKeysShareSlot: on a 3-primary Redis Cluster, for 200 hostile identities and every
// algorithm with two limits and idempotency, every key of one check hashes to one slot (as
// the server computes it), the checks run through the ClusterClient without CROSSSLOT or
// non-local-key errors (every decision from Redis), with and without pipelining, and the
// identities spread over all three primaries.
func TestClusterKeysShareSlot(t *testing.T) {
	cluster := startClusterT(t)
	cc := cluster.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	var checks []clusterCheck
	for _, alg := range algorithms {
		p := newPolicy(t, alg, FailOpen, perHour("hourly", 1000),
			Limit{Name: "minute", Requests: 100, Period: time.Minute, Burst: 20})
		for i, id := range hostileIdentities(200) {
			req := fmt.Sprintf("req-%d", i)
			checks = append(checks, clusterCheck{p: p, identity: id, req: req, keys: p.Keys(id, req)})
		}
	}

	slots := serverSlots(ctx, t, cc, checks)
	owner := slotOwners(ctx, t, cluster.Primaries()[0].Client())
	perPrimary := map[string]int{}
	for i, c := range checks {
		for j, s := range slots[i] {
			if s != slots[i][0] {
				t.Fatalf("%s identity %.40q: key %q in slot %d, key %q in slot %d",
					c.p.Algorithm, c.identity, c.keys[j], s, c.keys[0], slots[i][0])
			}
		}
		perPrimary[owner(slots[i][0])]++
	}
	t.Logf("%d checks over primaries %v", len(checks), perPrimary)
	if len(perPrimary) != 3 {
		t.Fatalf("identities landed on %d primaries %v, want all 3", len(perPrimary), perPrimary)
	}
	for addr, n := range perPrimary {
		if n < len(checks)/6 {
			t.Errorf("primary %s holds %d of %d identities, want about a third", addr, n, len(checks))
		}
	}

	for _, pipelining := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipelining=%v", pipelining), func(t *testing.T) {
			l := newLimiter(t, cc, Options{Pipelining: pipelining, Timeout: 5 * time.Second})
			runClusterChecks(ctx, t, l, checks)
		})
	}
}

// serverSlots asks the cluster (CLUSTER KEYSLOT, pipelined) for the slot of every key.
func serverSlots(ctx context.Context, t *testing.T, cc *redis.ClusterClient, checks []clusterCheck) [][]int64 {
	t.Helper()
	cmds := make([][]*redis.IntCmd, len(checks))
	pipe := cc.Pipeline()
	for i, c := range checks {
		for _, k := range c.keys {
			cmds[i] = append(cmds[i], pipe.ClusterKeySlot(ctx, k))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipelined CLUSTER KEYSLOT: %v", err)
	}
	out := make([][]int64, len(checks))
	for i := range cmds {
		for _, cmd := range cmds[i] {
			out[i] = append(out[i], cmd.Val())
		}
	}
	return out
}

// slotOwners returns a function from slot to the address of the primary serving it.
func slotOwners(ctx context.Context, t *testing.T, rdb *redis.Client) func(int64) string {
	t.Helper()
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	return func(slot int64) string {
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= slot && slot <= r.End {
					for _, n := range sh.Nodes {
						if n.Role == "master" {
							return fmt.Sprintf("%s:%d", n.IP, n.Port)
						}
					}
				}
			}
		}
		t.Fatalf("slot %d is served by no primary", slot)
		return ""
	}
}

// runClusterChecks runs each check with its request id and without, from 8 goroutines (so
// pipelines form and span nodes), and fails on any decision not made by Redis.
func runClusterChecks(ctx context.Context, t *testing.T, l *Limiter, checks []clusterCheck) {
	t.Helper()
	const workers = 8
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		bad []string
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(checks); i += workers {
				c := checks[i]
				for _, req := range []string{c.req, ""} {
					d := l.Check(ctx, c.p, Request{Identity: c.identity, RequestID: req})
					if d.Source != SourceRedis {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("%s identity %.40q req %q: %s: %v",
							c.p.Algorithm, c.identity, req, d.Source, d.Err))
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d of %d decisions not from Redis, e.g.:\n%s", len(bad), 2*len(checks),
			strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
}
