// Command sidecar-bench drives the sidecar's Envoy RLS v3 front end to end and prints
// markdown tables: the front in depth, beside the one-table `make bench`
// (test/bench/limiter), which measures it per algorithm. It starts a redis-server on
// loopback, loads a snapshot with one TokenBucket policy (Descriptor identity), serves the
// envoyrls.Service on a loopback gRPC listener in this process (test/bench/internal/rls), and
// drives it with concurrent real gRPC clients over many identities, with limits high enough
// that almost every request is admitted.
//
// Each row (pipelining off, then on) gives decisions/s, p50 and p99 as the client sees them,
// admitted/denied, the CPU spent per decision (this process, which is generator and sidecar,
// and redis-server), and the ratio to the ceiling: redis-benchmark -P 16 running EVALSHA of
// the same script with the same keys and arguments, in the same run. A last phase hammers
// one identity over its limit with the deny cache on and counts the EVALSHA calls Redis
// executed meanwhile (INFO commandstats): none until the retry-after passes.
//
// Generator, sidecar and Redis share the machine's CPUs (and, on a shared machine, other
// processes take their share too: the "other load" column), so the figures are a floor for
// a sidecar with cores of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchredis"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/rls"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

const (
	// hotRequests per minute is the hot identity's limit: once it is spent, Redis says no
	// for 60s/hotRequests = 12s, longer than the hot phase.
	hotRequests = 5
	// targetRatio and targetP99 are the goal on a 2-core machine shared by all three parts.
	targetRatio = 0.20
	targetP99   = 10 * time.Millisecond
)

type config struct {
	callers     int
	identities  int
	duration    time.Duration
	conns       int
	client      string
	workers     int
	pipeWorkers int
	rows        string
	hot         bool
	hotDuration time.Duration
	benchCalls  int
	cpuProfile  string
	memProfile  string
}

func main() {
	var c config
	flag.IntVar(&c.callers, "callers", 64, "concurrent gRPC callers")
	flag.IntVar(&c.identities, "identities", 10000, "distinct identities (descriptor values)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measurement per row")
	flag.IntVar(&c.conns, "conns", 2, "gRPC client connections the callers share")
	flag.StringVar(&c.client, "grpc-client", string(rls.Lean), "load client: lean (test/bench/internal/h2grpc, standing in for Envoy) or grpc-go")
	flag.IntVar(&c.workers, "stream-workers", 64, "gRPC server stream workers (grpc.NumStreamWorkers; 0: a new goroutine per call)")
	flag.IntVar(&c.pipeWorkers, "pipeline-workers", 0, "limiter pipelines in flight (limiter.Options.Workers; 0: its default)")
	flag.StringVar(&c.rows, "rows", "off,on", "pipelining modes to measure, comma-separated (off, on)")
	flag.BoolVar(&c.hot, "hot", true, "also measure one hot identity over its limit with the deny cache on")
	flag.DurationVar(&c.hotDuration, "hot-duration", 3*time.Second, "length of the hot phase (under its 12s retry-after)")
	flag.IntVar(&c.benchCalls, "redis-benchmark-calls", 300000, "calls of the redis-benchmark ceiling")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&c.memProfile, "memprofile", "", "write an allocation profile of the whole run to this file")
	flag.Parse()
	if err := benchMain(c); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar-bench:", err)
		os.Exit(1)
	}
}

func benchMain(c config) error {
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := run(context.Background(), c)
	if err != nil {
		return err
	}
	printReport(os.Stdout, c, rep)
	return writeMemProfile(c.memProfile)
}

// writeMemProfile writes the allocation profile to path, when set.
func writeMemProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	defer func() { _ = f.Close() }()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	return nil
}

// report is what one run measured.
type report struct {
	ceiling benchredis.Ceiling // redis-benchmark -P 16 EVALSHA
	rows    []row
	hot     *hotResult
}

// row is one configuration of the sidecar under load.
type row struct {
	name string
	load.Stats
}

// hotResult is the hot-identity phase.
type hotResult struct {
	load.Stats
	evalsha    int64         // EVALSHA calls Redis executed during the phase
	retryAfter time.Duration // what the denial said before the phase
}

// The policies of the snapshot: "api" carries the load (limits high enough that almost
// every request is admitted), "hot" is the hot identity's (hotRequests per minute).
func policies(c config) []rls.Policy {
	return []rls.Policy{
		{Name: "api", Route: "/api", Algorithm: v1alpha1.AlgorithmTokenBucket,
			Requests: int64(max(1000, c.callers*100)), Period: time.Second},
		{Name: "hot", Route: "/hot", Algorithm: v1alpha1.AlgorithmTokenBucket,
			Requests: hotRequests, Period: time.Minute},
	}
}

func run(ctx context.Context, c config) (_ *report, err error) {
	modes, err := parseRows(c.rows)
	if err != nil {
		return nil, err
	}
	procs := redistest.NewProcs()
	defer func() { err = errors.Join(err, procs.Close()) }()
	srv, err := procs.Server()
	if err != nil {
		return nil, err
	}
	opts := srv.Options()
	opts.PoolSize, opts.ContextTimeoutEnabled = max(c.callers, 10), true // as redisconn builds it
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }()
	store, err := rls.NewStore(policies(c)...)
	if err != nil {
		return nil, err
	}
	rep := &report{}
	if rep.ceiling, err = ceiling(ctx, rdb, srv.Port(), c, store.Current().Rule("api").Policy); err != nil {
		return nil, err
	}
	for _, piped := range modes {
		r, err := measureRow(ctx, c, rdb, store, piped)
		if err != nil {
			return nil, err
		}
		rep.rows = append(rep.rows, r)
	}
	if c.hot {
		if rep.hot, err = measureHot(ctx, c, rdb, store); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// parseRows reads -rows: the pipelining modes to measure, in order.
func parseRows(rows string) ([]bool, error) {
	var modes []bool
	for mode := range strings.SplitSeq(rows, ",") {
		switch strings.TrimSpace(mode) {
		case "off":
			modes = append(modes, false)
		case "on":
			modes = append(modes, true)
		default:
			return nil, fmt.Errorf("-rows: unknown mode %q, want on or off", mode)
		}
	}
	return modes, nil
}

func rlsConfig(c config) rls.Config {
	return rls.Config{Client: rls.Client(c.client), Conns: c.conns, StreamWorkers: c.workers}
}

func redisCPU(rdb *redis.Client) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) { return benchredis.CPU(ctx, rdb) }
}

func measureRow(ctx context.Context, c config, rdb *redis.Client, store *engine.Store, piped bool) (row, error) {
	r := row{name: "pipelining off"}
	if piped {
		r.name = "pipelining on"
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return r, fmt.Errorf("flushall: %w", err)
	}
	s, err := rls.Start(rlsConfig(c), rdb, store, limiter.Options{Pipelining: piped, Workers: c.pipeWorkers, Timeout: time.Second})
	if err != nil {
		return r, err
	}
	defer s.Stop()
	call := s.Caller(rls.Requests("/api", c.identities))
	if _, err := load.Drive(ctx, c.callers, min(c.duration/10, time.Second), call); err != nil { // warm up
		return r, err
	}
	r.Stats, err = load.Measure(ctx, c.callers, c.duration, call, redisCPU(rdb))
	return r, err
}

// measureHot spends the hot identity's limit, then has every caller ask for it while
// counting the EVALSHA calls Redis executes.
func measureHot(ctx context.Context, c config, rdb *redis.Client, store *engine.Store) (*hotResult, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, fmt.Errorf("flushall: %w", err)
	}
	s, err := rls.Start(rlsConfig(c), rdb, store, limiter.Options{Pipelining: true, Workers: c.pipeWorkers, DenyCacheSize: 10000, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	req := rls.Request("/hot", "hot-user")
	h := &hotResult{}
	for range hotRequests + 1 {
		resp, err := s.Call(ctx, 0, req)
		if err != nil {
			return nil, fmt.Errorf("spend the hot limit: %w", err)
		}
		h.retryAfter = resp.GetStatuses()[0].GetDurationUntilReset().AsDuration()
	}
	before, err := benchredis.Commandstat(ctx, rdb, "evalsha")
	if err != nil {
		return nil, err
	}
	h.Stats, err = load.Measure(ctx, c.callers, c.hotDuration, s.Caller([]*rlsv3.RateLimitRequest{req}), redisCPU(rdb))
	if err != nil {
		return nil, err
	}
	after, err := benchredis.Commandstat(ctx, rdb, "evalsha")
	h.evalsha = after.Calls - before.Calls
	return h, err
}

// ceiling runs redis-benchmark -P 16 with EVALSHA of p's script over random identities,
// with the keys and arguments one check of p sends.
func ceiling(ctx context.Context, rdb *redis.Client, port int, c config, p *limiter.Policy) (benchredis.Ceiling, error) {
	var args []string
	for _, a := range p.Args(limiter.Request{Cost: 1}) {
		args = append(args, fmt.Sprint(a))
	}
	return benchredis.Benchmark(ctx, rdb, port, benchredis.BenchmarkSpec{Source: p.Script().Source,
		Keys: p.Keys("user-__rand_int__", ""), Args: args, Calls: c.benchCalls, Identities: c.identities})
}

func printReport(w io.Writer, c config, r *report) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	p("sidecar-bench: Envoy RLS v3 over loopback gRPC: %d callers on %d connections of the %s client, %d identities, %s per row, "+
		"%d stream workers, %d CPUs shared by generator, sidecar and redis-server\n\n",
		c.callers, c.conns, c.client, c.identities, c.duration, c.workers, runtime.NumCPU())
	p("| mode | decisions/s | p50 | p99 | admitted | denied | without Redis | other load | ceiling (redis-benchmark -P16 EVALSHA/s) | ratio | target (>= %.0f%% of the larger ceiling, p99 <= %s) |\n",
		100*targetRatio, targetP99)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	// The verdict holds the row against the larger of the measured and the idle ceiling, so
	// a redis-benchmark starved by other processes cannot flatter it.
	ref := max(r.ceiling.PerSec, r.idleCeiling())
	for _, row := range r.rows {
		ratio := row.PerSec / r.ceiling.PerSec
		verdict := "met"
		if row.PerSec/ref < targetRatio || row.P99 > targetP99 {
			verdict = "missed"
		}
		p("| %s | %.0f | %s | %s | %d | %d | %d | %s | %.0f | %.1f%% | %s |\n", row.name, row.PerSec,
			ms(row.P50), ms(row.P99), row.Admitted, row.Denied, row.Fallbacks, percent(row.OtherLoad),
			r.ceiling.PerSec, 100*ratio, verdict)
	}
	printCPU(p, r)
	if h := r.hot; h != nil {
		p("\n| hot identity (deny cache on, pipelining on) | decisions | decisions/s | p99 | denied | other load | EVALSHA calls in Redis | retry-after |\n")
		p("|---|---:|---:|---:|---:|---:|---:|---:|\n")
		p("| one identity over its limit for %s | %d | %.0f | %s | %d | %s | %d | %s |\n", c.hotDuration, h.Calls,
			h.PerSec, ms(h.P99), h.Denied, percent(h.OtherLoad), h.evalsha, h.retryAfter.Round(time.Millisecond))
	}
}

// idleCeiling is the ceiling Redis would reach with a core to itself: 1s over its CPU per
// EVALSHA under redis-benchmark; 0 when unknown.
func (r *report) idleCeiling() float64 {
	if r.ceiling.CPUCall <= 0 {
		return 0
	}
	return float64(time.Second) / float64(r.ceiling.CPUCall)
}

// printCPU prints the CPU accounting, which other processes on a shared machine do not
// skew: the decisions/s the CPUs would carry if generator, sidecar and Redis had them all,
// against the ceiling Redis would reach with a core to itself.
func printCPU(p func(string, ...any), r *report) {
	idleCeiling := r.idleCeiling()
	p("\n| mode | CPU/decision sidecar+generator | CPU/decision Redis | allocated/decision | decisions/s on %d idle CPUs | idle ceiling (Redis CPU %s/EVALSHA) | ratio |\n",
		runtime.NumCPU(), us(r.ceiling.CPUCall))
	p("|---|---:|---:|---:|---:|---:|---:|\n")
	rows := r.rows
	if r.hot != nil {
		rows = append(slices.Clip(rows), row{name: "hot identity (no Redis)", Stats: r.hot.Stats})
	}
	for _, row := range rows {
		capacity := float64(runtime.NumCPU()) * float64(time.Second) / float64(max(row.CPU+row.RedisCPU, 1))
		p("| %s | %s | %s | %d B | %.0f | %.0f | %s |\n", row.name, us(row.CPU), us(row.RedisCPU), row.Allocs,
			capacity, idleCeiling, percent(capacity/max(idleCeiling, 1)))
	}
}

func us(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func percent(f float64) string {
	if f < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}
