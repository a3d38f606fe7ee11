package usage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

const (
	// foreignKeys is how many keys another tenant holds in the bounded-work test: at 0.5 to
	// 1 µs per key a SCAN examines, walking them all costs Redis 250 to 500 ms, 5 to 10
	// times the bound of one overview.
	foreignKeys = 500_000
	// maxOverviewRedis is the most Redis time one overview may take, whatever the server
	// holds.
	maxOverviewRedis = 50 * time.Millisecond
)

// overviewCommands are the commands of an overview whose time INFO commandstats counts once:
// its SCAN steps, the INFO keyspace of each primary, and the peek scripts (the commands a
// script runs are counted inside its own time, and again under their names: not summed
// here). The manager's own memory checks (a SCAN step and INFO a second) count too.
var overviewCommands = []string{"scan", "info", "evalsha", "evalsha_ro", "eval", "eval_ro", "fcall", "fcall_ro"}

// TestOverviewRedisWorkIsBounded: with 500,000 keys of another tenant on the Redis, one
// overview of a policy with 22 callers takes at most 50 ms of Redis time (INFO
// commandstats: its SCANs, INFO keyspace and peeks) where it used to walk the whole keyspace;
// its answer is partial and says so (a continuation, the keys examined of the keys held).
// Three overviews at once by one reader are not all served: the reader has one in flight
// and one a second (a burst of 2), and the rest are answered 429 with a Retry-After.
func TestOverviewRedisWorkIsBounded(t *testing.T) {
	r := startRig(t, redistest.WithArgs("--enable-debug-command", "local"))
	a := kube.NewNamespace(t, r.env, "bounded-")
	r.policy(t, a)
	spendCallers(t, r, a)
	reader := r.serviceAccount(t, a, "reader", usageRule("get"))
	rdb := r.rds.Client()
	ctx := context.Background()
	if err := rdb.Do(ctx, "DEBUG", "POPULATE", foreignKeys, "{rl:other-tenant/orders:caller-", 40).Err(); err != nil {
		t.Fatalf("another tenant's %d keys: %v", foreignKeys, err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, got, raw := r.top(t, reader, a, "")
	wall := time.Since(start)
	used, calls := redisTime(t, rdb)
	t.Logf("one overview among %d keys of another tenant: %v of Redis (%s), %v in all; %d of %d keys examined, %d callers, complete %v",
		foreignKeys, used, calls, wall, got.Examined, got.Keys, got.Callers, got.Complete)
	if code != http.StatusOK || used > maxOverviewRedis {
		t.Errorf("one overview: %d, %v of Redis time (%s); want 200 within %v", code, used, calls, maxOverviewRedis)
	}
	if code == http.StatusOK && (got.Complete || !got.Truncated || got.Continue == "" || got.Keys < foreignKeys ||
		got.Examined < 1000 || got.Examined >= got.Keys) {
		t.Errorf("one overview of %d keys: %.300s; want a partial answer saying how much it examined, with a continuation", foreignKeys, raw)
	}
	requireOneReaderLimited(t, r, reader, a)
}

// requireOneReaderLimited sends 3 overviews at once as reader and requires at least one
// answered 429 with a Retry-After of whole seconds, and every other answered 200.
func requireOneReaderLimited(t *testing.T, r *rig, reader, ns string) {
	t.Helper()
	type answer struct {
		code       int
		retryAfter string
	}
	answers := make([]answer, 3)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			code, h, _ := r.topRaw(t, reader, ns, "")
			answers[i] = answer{code, h.Get("Retry-After")}
		})
	}
	wg.Wait()
	limited := 0
	for _, a := range answers {
		switch n, err := strconv.Atoi(a.retryAfter); {
		case a.code == http.StatusTooManyRequests && err == nil && n >= 1:
			limited++
		case a.code != http.StatusOK:
			t.Errorf("3 overviews at once by one reader: %+v; want 200 or 429 with a Retry-After", answers)
		}
	}
	if limited == 0 {
		t.Errorf("3 overviews at once by one reader: %+v; want at least one 429 with a Retry-After", answers)
	}
}

// TestOverviewContinuationsCoverEveryCaller: on a small keyspace (A's 22 callers, B's 30, 2,000
// keys of another tenant) one overview is complete: 22 callers, 1 denied, alice first. The
// plugin reading 3 callers a request with --all follows the continuations, paced by the
// server's Retry-After, to the same answer: every caller once, the same denials, the same
// ranking. A forged continuation is harmless: one that is not the server's is refused (400
// naming continue), one naming a primary Redis lacks too, and any cursor reads A's callers
// only.
func TestOverviewContinuationsCoverEveryCaller(t *testing.T) {
	r := startRig(t, redistest.WithArgs("--enable-debug-command", "local"))
	a, b := kube.NewNamespace(t, r.env, "cont-a-"), kube.NewNamespace(t, r.env, "cont-b-")
	r.policy(t, a)
	r.policy(t, b)
	spendCallers(t, r, a)
	for i := range 30 {
		r.spend(t, b, fmt.Sprintf("b-caller-%d", i), 1)
	}
	if err := r.rds.Client().Do(context.Background(), "DEBUG", "POPULATE", 2000, "{rl:other-tenant/orders:caller-", 40).Err(); err != nil {
		t.Fatal(err)
	}
	reader := r.serviceAccount(t, a, "reader", usageRule("get"))
	code, whole, raw := r.top(t, reader, a, "?n=22")
	if code != http.StatusOK || !whole.Complete || whole.Callers != 22 || whole.Denied != 1 || len(whole.Top) != 22 ||
		whole.Top[0].IdentityHash != snapshot.IdentityHash("alice") {
		t.Fatalf("one overview of a small keyspace: %d %.400s; want complete, 22 callers, 1 denied, alice first", code, raw)
	}
	parts := pluginTopAll(t, r, a, reader, "--max", "3", "--n", "22")
	if parts.Callers != whole.Callers || parts.Denied != whole.Denied || !parts.Complete || parts.Truncated ||
		!slices.Equal(hashes(parts.Top), hashes(whole.Top)) || parts.Examined > parts.Keys {
		t.Fatalf("the plugin's --all, 3 callers a request: %+v\nwant the one overview's %+v", parts, whole)
	}
	requireForgedContinuationsHarmless(t, r, a)
}

// requireForgedContinuationsHarmless asks for ns's overview with continuations a client made
// up, as a reader of its own (the rate is per reader).
func requireForgedContinuationsHarmless(t *testing.T, r *rig, ns string) {
	t.Helper()
	forger := r.serviceAccount(t, ns, "forger", usageRule("get"))
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []string{"garbage", enc("c1.7.0"), enc("c1.0.0.0"), strings.Repeat("A", 200)} {
		if code, _, raw := r.topWaiting(t, forger, ns, "?continue="+c); code != http.StatusBadRequest || !strings.Contains(raw, "continue:") {
			t.Errorf("continue=%.40s: %d %s, want 400 naming continue", c, code, raw)
		}
	}
	want := map[string]bool{}
	for _, id := range callersOfA() {
		want[snapshot.IdentityHash(id)] = true
	}
	for _, cursor := range []string{"1", "77", "4095", "18446744073709551615"} {
		code, got, raw := r.topWaiting(t, forger, ns, "?n=100&continue="+enc("c1.0."+cursor))
		if code != http.StatusOK {
			t.Fatalf("continue at cursor %s: %d %s, want 200", cursor, code, raw)
		}
		for _, c := range got.Top {
			if !want[c.IdentityHash] {
				t.Fatalf("continue at cursor %s read caller %s, not one of A's", cursor, c.IdentityHash)
			}
		}
	}
}

// topWaiting is top, asked again after the Retry-After of a 429 (at most 10 times).
func (r *rig) topWaiting(t *testing.T, token, ns, query string) (int, usage.Top, string) {
	t.Helper()
	for range 10 {
		code, h, body := r.topRaw(t, token, ns, query)
		if code != http.StatusTooManyRequests {
			var out usage.Top
			if code == http.StatusOK {
				if err := json.Unmarshal([]byte(body), &out); err != nil {
					t.Fatal(err)
				}
			}
			return code, out, body
		}
		n, err := strconv.Atoi(h.Get("Retry-After"))
		if err != nil || n < 1 {
			t.Fatalf("429 with Retry-After %q", h.Get("Retry-After"))
		}
		time.Sleep(time.Duration(n) * time.Second)
	}
	t.Fatalf("overview %s still refused after 10 tries", query)
	return 0, usage.Top{}, ""
}

// pluginTopAll runs kubectl-ratelimit top --all -o json as token's ServiceAccount in ns,
// with more flags, and decodes what it printed.
func pluginTopAll(t *testing.T, r *rig, ns, token string, more ...string) usage.Top {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteTokenKubeconfig(r.env.Config, kubeconfig, token, ns); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig", kubeconfig, "--server", r.url, "--certificate-authority", r.caFile,
		"top", policyName, "--all", "-o", "json"}, more...)
	start := time.Now()
	cmd := exec.Command(proc.MustBuild(t, "cmd/kubectl-ratelimit"), args...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("kubectl-ratelimit %q: %v\n%s", args, err, exit.Stderr)
	}
	if err != nil {
		t.Fatal(err)
	}
	var got usage.Top
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("kubectl-ratelimit %q printed %s: %v", args, out, err)
	}
	t.Logf("kubectl ratelimit top --all %q: %d callers in %v", more, got.Callers, time.Since(start))
	return got
}

// callersOfA are the identities spendCallers spends for.
func callersOfA() []string {
	ids := []string{"alice", "bob"}
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("caller-%d", i))
	}
	return ids
}

// spendCallers spends in ns as TestUsageTopUnderRBAC does: alice her 5 and one denied, bob
// 2, 20 others 1 each.
func spendCallers(t *testing.T, r *rig, ns string) {
	t.Helper()
	r.spend(t, ns, "alice", 6)
	r.spend(t, ns, "bob", 2)
	for _, id := range callersOfA()[2:] {
		r.spend(t, ns, id, 1)
	}
}

// hashes are the callers' identity hashes, in order.
func hashes(top []usage.TopCaller) []string {
	out := make([]string, len(top))
	for i, c := range top {
		out[i] = c.IdentityHash
	}
	return out
}

// redisTime is the time INFO commandstats counts for overviewCommands since the last
// CONFIG RESETSTAT, and the calls it counts, named.
func redisTime(t *testing.T, rdb *redis.Client) (time.Duration, string) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	var calls []string
	for line := range strings.SplitSeq(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_")), ":")
		if !ok || !slices.Contains(overviewCommands, name) {
			continue
		}
		var n, usec int64
		for kv := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				n, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		total += usec
		calls = append(calls, fmt.Sprintf("%s %d calls %d µs", name, n, usec))
	}
	return time.Duration(total) * time.Microsecond, strings.Join(calls, ", ")
}
