package limiter

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// Load shape shared by the over-admission tests (load_test.go) and the naive limiter
// (naive_test.go): 8 clients (separate go-redis pools, like 8 pods) x 32 goroutines, each
// goroutine making a fixed number of attempts against one identity with limit loadLimit.
const (
	loadClients    = 8
	loadGoroutines = 32
	loadAttempts   = 5 // per goroutine: 8*32*5 = 1280 attempts >= 3 * loadLimit
	loadLimit      = 400
	// loadCallTimeout is the limiter's Timeout under load: the load tests are about atomicity,
	// so a slow reply on a busy 2-core machine must not turn into a failure-mode decision.
	loadCallTimeout = 5 * time.Second
	// loadCaseTimeout bounds one load case as a whole.
	loadCaseTimeout = 30 * time.Second
)

// outcome is one attempt's result, as far as the load tests care.
type outcome struct {
	allowed   bool
	source    string
	remaining int64
	err       error
}

// loadResult aggregates one load run.
type loadResult struct {
	attempts  int
	admitted  int
	bySource  map[string]int
	remaining []int64 // Remaining of every admitted attempt
	errs      []error // the first few errors, for the failure message
	elapsed   time.Duration
}

func (r loadResult) perSecond() float64 { return float64(r.attempts) / r.elapsed.Seconds() }

// hammer runs goroutines goroutines for each of clients clients, each making attempts calls
// of check(ctx, client), all released at the same moment, and adds up what they saw. It is
// bounded by the attempt count and by ctx, which check must honour.
func hammer(ctx context.Context, clients, goroutines, attempts int,
	check func(ctx context.Context, client int) outcome) loadResult {
	res := loadResult{bySource: map[string]int{}}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for c := range clients {
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := loadResult{bySource: map[string]int{}}
				<-start
				for range attempts {
					o := check(ctx, c)
					local.attempts++
					local.bySource[o.source]++
					if o.allowed {
						local.admitted++
						local.remaining = append(local.remaining, o.remaining)
					}
					if o.err != nil && len(local.errs) < 3 {
						local.errs = append(local.errs, o.err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				res.attempts += local.attempts
				res.admitted += local.admitted
				res.remaining = append(res.remaining, local.remaining...)
				for s, n := range local.bySource {
					res.bySource[s] += n
				}
				if len(res.errs) < 5 {
					res.errs = append(res.errs, local.errs...)
				}
			}()
		}
	}
	begin := time.Now()
	close(start)
	wg.Wait()
	res.elapsed = time.Since(begin)
	return res
}

// limiterCheck adapts Limiter.Check to hammer: client i checks through limiters[i].
func limiterCheck(limiters []*Limiter, p *Policy, identity string) func(context.Context, int) outcome {
	return func(ctx context.Context, i int) outcome {
		d := limiters[i].Check(ctx, p, Request{Identity: identity})
		return outcome{allowed: d.Allowed, source: string(d.Source), remaining: d.Remaining, err: d.Err}
	}
}

// loadClientsFor returns n independent go-redis clients (separate connection pools) built by
// mk, closed when the test ends.
func loadClientsFor(t testing.TB, n int, mk func() redis.UniversalClient) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, n)
	for i := range out {
		c := mk()
		t.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out
}

// limitersOn returns one Limiter per client, like one per pod.
func limitersOn(t testing.TB, clients []redis.UniversalClient, o Options) []*Limiter {
	t.Helper()
	out := make([]*Limiter, len(clients))
	for i, c := range clients {
		out[i] = newLimiter(t, c, o)
	}
	return out
}

// assertExactlyOnce checks that the admitted decisions' Remaining values are exactly
// limit-1, limit-2, ..., 0, each once: every admission saw the state left by the one before
// it, i.e. the checks were serialized.
func assertExactlyOnce(t testing.TB, remaining []int64, limit int64) {
	t.Helper()
	got := slices.Clone(remaining)
	slices.Sort(got)
	for i, r := range got {
		if r != int64(i) {
			t.Errorf("admitted decisions' remaining values are not 0..%d each once: sorted[%d] = %d (first values %v)",
				limit-1, i, r, got[:min(len(got), 10)])
			return
		}
	}
}

// safeWindowPeriod returns the period to use for an hourly window limit so that the current
// window, aligned to the Unix epoch on the Redis clock as the scripts align it, does not end
// within margin: time.Hour itself when the hour boundary is at least margin away, otherwise
// the first period a few milliseconds longer than an hour whose boundary is (the window
// number is floor(now / period), so a longer period moves the boundary by minutes).
func safeWindowPeriod(t testing.TB, rdb redis.Cmdable, margin time.Duration) time.Duration {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	for d := time.Duration(0); d < time.Second; d += time.Millisecond {
		p := time.Hour + d
		if left := p - time.Duration(now.UnixNano())%p; left >= margin {
			return p
		}
	}
	t.Fatalf("no period within 1s of an hour leaves %s in the window", margin)
	return 0
}

// loadLimitFor returns the limit of loadLimit requests per (about) an hour for alg: exactly an
// hour for the refilling algorithms, whose first refill comes period/loadLimit = 9 s after the
// first debit, and a window that does not end within a minute for the window algorithms.
func loadLimitFor(t testing.TB, alg Algorithm, rdb redis.Cmdable) Limit {
	t.Helper()
	l := perHour("hourly", loadLimit)
	if alg == FixedWindow || alg == SlidingWindow {
		l.Period = safeWindowPeriod(t, rdb, time.Minute)
	}
	return l
}

// scriptCalls returns how many EVALSHA and EVAL calls the server has run (INFO commandstats).
func scriptCalls(t testing.TB, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	return commandCalls(t, info, "evalsha") + commandCalls(t, info, "eval")
}

// commandCalls parses the calls= count of one command from INFO commandstats (0 if absent).
func commandCalls(t testing.TB, info, cmd string) int64 {
	t.Helper()
	return commandField(t, info, cmd, "calls")
}

// commandField parses one numeric field (calls, failed_calls, ...) of a command's line in
// INFO commandstats (0 if absent).
func commandField(t testing.TB, info, cmd, field string) int64 {
	t.Helper()
	prefix := "cmdstat_" + cmd + ":"
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(f, field+"="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("parse %q: %v", line, err)
				}
				return n
			}
		}
	}
	return 0
}

// scanAll returns every key in the server's database 0.
func scanAll(t testing.TB, rdb *redis.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return keys
}

// percentile returns the p-th percentile (0..100) of ds, which it sorts.
func percentile(ds []time.Duration, p int) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

// startClusterT starts a 3-primary Redis Cluster for the test.
func startClusterT(t testing.TB) *redistest.Cluster {
	t.Helper()
	redistest.RequireRedis(t)
	return redistest.StartCluster(t, 3)
}
