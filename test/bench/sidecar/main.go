// Command sidecar-bench drives the sidecar's Envoy RLS v3 front end to end and prints
// markdown tables. It starts a redis-server on loopback, loads a snapshot with one
// TokenBucket policy (Descriptor identity), serves the EnvoyServer on a loopback gRPC
// listener in this process, and drives it with concurrent real gRPC clients over many
// identities, with limits high enough that almost every request is admitted.
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
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

const (
	namespace = "bench"
	domain    = "edge"
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
	ceiling float64 // redis-benchmark -P 16 EVALSHA calls/s
	// ceilingCPU is redis-server's CPU per EVALSHA under redis-benchmark: 1s / ceilingCPU is
	// the ceiling Redis would reach with a core to itself, whatever else the machine ran.
	ceilingCPU time.Duration
	rows       []row
	hot        *hotResult
}

// row is one configuration of the sidecar under load.
type row struct {
	name string
	stats
}

// stats are the figures of one measurement.
type stats struct {
	calls     int
	perSec    float64
	p50, p99  time.Duration
	admitted  int
	denied    int
	fallbacks int           // admitted without Redis (a timeout, FailOpen): should be 0
	cpu       time.Duration // CPU of this process (generator and sidecar) per decision
	redisCPU  time.Duration // CPU of redis-server per decision
	otherLoad float64       // share of the machine's CPU other processes used meanwhile; <0 unknown
	allocs    uint64        // bytes this process allocated per decision
}

// hotResult is the hot-identity phase.
type hotResult struct {
	stats
	evalsha    int64         // EVALSHA calls Redis executed during the phase
	retryAfter time.Duration // what the denial said before the phase
}

func run(ctx context.Context, c config) (*report, error) {
	modes, err := parseRows(c.rows)
	if err != nil {
		return nil, err
	}
	srv, err := startServer()
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), PoolSize: max(c.callers, 10),
		ContextTimeoutEnabled: true}) // as redisconn builds it
	defer func() { _ = rdb.Close() }()
	store, err := newStore(c)
	if err != nil {
		return nil, err
	}
	rep := &report{}
	if rep.ceiling, rep.ceilingCPU, err = ceiling(ctx, rdb, srv, c, store.Current().Policy("api").Policy); err != nil {
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

// newStore loads a snapshot with the load policy "api" (limits high enough that almost
// every request is admitted) and the hot policy "hot" (hotRequests per minute).
func newStore(c config) (*sidecar.Store, error) {
	perSecond := int64(max(1000, c.callers*100))
	s := &snapshot.Snapshot{Namespace: namespace,
		Redis: snapshot.Redis{Mode: "standalone", Addrs: []string{"127.0.0.1:6379"}}}
	for _, p := range []*v1alpha1.RateLimitPolicy{
		benchPolicy("api", "/api", perSecond, time.Second),
		benchPolicy("hot", "/hot", hotRequests, time.Minute),
	} {
		policy.Default(p)
		compiled, errs := policy.Compile(p)
		if len(errs) > 0 {
			return nil, fmt.Errorf("compile %s: %w", p.Name, errs.ToAggregate())
		}
		e := policy.Snapshot(p, compiled)
		s.Policies = append(s.Policies, e)
		s.Scripts = []snapshot.Script{{Name: e.Script, SHA: e.SHA}} // both are TokenBucket
	}
	if err := s.Seal(); err != nil {
		return nil, fmt.Errorf("seal snapshot: %w", err)
	}
	data, err := s.Marshal()
	if err != nil {
		return nil, fmt.Errorf("marshal snapshot: %w", err)
	}
	store := &sidecar.Store{Namespace: namespace, Log: logr.Discard()}
	if err := store.Load(data, "bench"); err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	return store, nil
}

// benchPolicy is a FailOpen TokenBucket policy on descriptors with route, per "user" entry.
func benchPolicy(name, route string, requests int64, period time.Duration) *v1alpha1.RateLimitPolicy {
	return &v1alpha1.RateLimitPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.RateLimitPolicySpec{
			Match: v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: domain,
				Descriptors: []v1alpha1.DescriptorMatch{{Key: "route", Value: route}}}},
			Identity: v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{
				{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "user"}},
			}, OnMissing: v1alpha1.MissingIdentityShared},
			Algorithm:   v1alpha1.AlgorithmTokenBucket,
			Limits:      []v1alpha1.Limit{{Name: "rate", Requests: requests, Period: metav1.Duration{Duration: period}}},
			FailureMode: v1alpha1.FailureModeFailOpen,
		},
	}
}

// sidecarUnderTest is an EnvoyServer on a loopback gRPC listener, with its clients.
type sidecarUnderTest struct {
	limiter *limiter.Limiter
	grpc    *grpc.Server
	conns   []*grpc.ClientConn
	clients []rlsv3.RateLimitServiceClient
}

func startSidecar(c config, rdb *redis.Client, store *sidecar.Store, opts limiter.Options) (*sidecarUnderTest, error) {
	lim, err := limiter.New(rdb, opts)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		lim.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	var sopts []grpc.ServerOption
	if c.workers > 0 {
		// Workers keep their grown stacks; a goroutine per call grows a fresh one each time.
		sopts = append(sopts, grpc.NumStreamWorkers(uint32(c.workers))) //nolint:gosec // a small flag value
	}
	s := &sidecarUnderTest{limiter: lim, grpc: grpc.NewServer(sopts...)}
	engine := &sidecar.Engine{Store: store, Limiter: lim, Metrics: sidecar.NewMetrics(prometheus.NewRegistry())}
	(&sidecar.EnvoyServer{Engine: engine, Log: logr.Discard()}).Register(s.grpc)
	go func() { _ = s.grpc.Serve(lis) }()
	for range max(c.conns, 1) {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			s.stop()
			return nil, fmt.Errorf("dial: %w", err)
		}
		s.conns = append(s.conns, conn)
		s.clients = append(s.clients, rlsv3.NewRateLimitServiceClient(conn))
	}
	return s, nil
}

func (s *sidecarUnderTest) stop() {
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.grpc.Stop()
	s.limiter.Close()
}

// request is a ShouldRateLimit request for one identity on route.
func request(route, user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "route", Value: route}, {Key: "user", Value: user}},
	}}}
}

func measureRow(ctx context.Context, c config, rdb *redis.Client, store *sidecar.Store, piped bool) (row, error) {
	r := row{name: "pipelining off"}
	if piped {
		r.name = "pipelining on"
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return r, fmt.Errorf("flushall: %w", err)
	}
	s, err := startSidecar(c, rdb, store, limiter.Options{Pipelining: piped, Workers: c.pipeWorkers, Timeout: time.Second})
	if err != nil {
		return r, err
	}
	defer s.stop()
	reqs := make([]*rlsv3.RateLimitRequest, max(c.identities, 1))
	for i := range reqs {
		reqs[i] = request("/api", fmt.Sprintf("user-%08d", i))
	}
	call := func(ctx context.Context, g int, rng *rand.Rand) (*rlsv3.RateLimitResponse, error) {
		return s.clients[g%len(s.clients)].ShouldRateLimit(ctx, reqs[rng.IntN(len(reqs))])
	}
	if _, err := drive(ctx, c.callers, min(c.duration/10, time.Second), call); err != nil { // warm up
		return r, err
	}
	r.stats, err = measure(ctx, rdb, c.callers, c.duration, call)
	return r, err
}

// measureHot spends the hot identity's limit, then has every caller ask for it while
// counting the EVALSHA calls Redis executes.
func measureHot(ctx context.Context, c config, rdb *redis.Client, store *sidecar.Store) (*hotResult, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, fmt.Errorf("flushall: %w", err)
	}
	s, err := startSidecar(c, rdb, store, limiter.Options{Pipelining: true, Workers: c.pipeWorkers, DenyCacheSize: 10000, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer s.stop()
	req := request("/hot", "hot-user")
	h := &hotResult{}
	for range hotRequests + 1 {
		resp, err := s.clients[0].ShouldRateLimit(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("spend the hot limit: %w", err)
		}
		h.retryAfter = resp.GetStatuses()[0].GetDurationUntilReset().AsDuration()
	}
	before, err := evalshaCalls(ctx, rdb)
	if err != nil {
		return nil, err
	}
	h.stats, err = measure(ctx, rdb, c.callers, c.hotDuration, func(ctx context.Context, g int, _ *rand.Rand) (*rlsv3.RateLimitResponse, error) {
		return s.clients[g%len(s.clients)].ShouldRateLimit(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	after, err := evalshaCalls(ctx, rdb)
	h.evalsha = after - before
	return h, err
}

// caller sends one request as caller g.
type caller func(ctx context.Context, g int, rng *rand.Rand) (*rlsv3.RateLimitResponse, error)

// measure drives fn and adds the CPU figures: this process's, redis-server's, and the
// machine's as a whole.
func measure(ctx context.Context, rdb *redis.Client, callers int, d time.Duration, fn caller) (stats, error) {
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	proc0, machine0 := processCPU(), machineBusy()
	redis0, err := redisCPU(ctx, rdb)
	if err != nil {
		return stats{}, err
	}
	start := time.Now()
	s, err := drive(ctx, callers, d, fn)
	if err != nil || s.calls == 0 {
		return s, err
	}
	elapsed := time.Since(start)
	redis1, err := redisCPU(ctx, rdb)
	if err != nil {
		return s, err
	}
	proc, red := processCPU()-proc0, redis1-redis0
	runtime.ReadMemStats(&mem1)
	s.allocs = (mem1.TotalAlloc - mem0.TotalAlloc) / uint64(s.calls)
	s.cpu, s.redisCPU = proc/time.Duration(s.calls), red/time.Duration(s.calls)
	s.otherLoad = -1
	if machine1 := machineBusy(); machine0 >= 0 && machine1 >= 0 {
		other := machine1 - machine0 - proc - red
		s.otherLoad = max(0, float64(other)/float64(elapsed*time.Duration(runtime.NumCPU())))
	}
	return s, nil
}

// tally is one caller's figures.
type tally struct {
	lat                         []time.Duration
	admitted, denied, fallbacks int
}

// drive runs callers goroutines calling fn back to back for d and returns the figures.
func drive(ctx context.Context, callers int, d time.Duration, fn caller) (stats, error) {
	tallies := make([]tally, callers)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := range callers {
		wg.Go(func() {
			if err := callLoop(ctx, g, deadline, fn, &tallies[g]); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return stats{}, err
	}
	return summarize(tallies, elapsed), nil
}

func callLoop(ctx context.Context, g int, deadline time.Time, fn caller, t *tally) error {
	rng := rand.New(rand.NewPCG(uint64(g), 7)) //nolint:gosec // load generation, not security
	t.lat = make([]time.Duration, 0, 4096)
	for {
		t0 := time.Now()
		if !t0.Before(deadline) {
			return nil
		}
		resp, err := fn(ctx, g, rng)
		if err != nil {
			return fmt.Errorf("ShouldRateLimit: %w", err)
		}
		t.lat = append(t.lat, time.Since(t0))
		switch {
		case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
			t.denied++
		case resp.GetStatuses()[0].GetCurrentLimit() == nil:
			t.admitted++
			t.fallbacks++ // FailOpen admitted without Redis: no limit to report
		default:
			t.admitted++
		}
	}
}

func summarize(tallies []tally, elapsed time.Duration) stats {
	var s stats
	var all []time.Duration
	for i := range tallies {
		t := &tallies[i]
		all = append(all, t.lat...)
		s.admitted += t.admitted
		s.denied += t.denied
		s.fallbacks += t.fallbacks
	}
	if len(all) == 0 {
		return s
	}
	slices.Sort(all)
	s.calls = len(all)
	s.perSec = float64(len(all)) / elapsed.Seconds()
	s.p50, s.p99 = all[len(all)/2], all[len(all)*99/100]
	return s
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy is the CPU time all processes have used since boot (Linux /proc/stat), or -1.
func machineBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var busy int64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -1
		}
		if i != 3 && i != 4 { // not idle, not iowait
			busy += n
		}
	}
	return time.Duration(busy) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// redisCPU is the CPU time redis-server has used (INFO cpu).
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("info cpu: %w", err)
	}
	var total float64
	for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
		v, ok := infoField(info, field)
		if !ok {
			return 0, fmt.Errorf("no %s in INFO cpu", field)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s%q: %w", field, v, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

// infoField is the rest of the INFO line starting with prefix.
func infoField(info, prefix string) (string, bool) {
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return rest, true
		}
	}
	return "", false
}

// evalshaCalls is the calls= figure of cmdstat_evalsha in INFO commandstats (0 before the
// first call).
func evalshaCalls(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("info commandstats: %w", err)
	}
	rest, ok := infoField(info, "cmdstat_evalsha:")
	if !ok {
		return 0, nil
	}
	for kv := range strings.SplitSeq(rest, ",") {
		if v, ok := strings.CutPrefix(kv, "calls="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("evalsha calls %q: %w", v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no calls= in cmdstat_evalsha:%s", rest)
}

// ceiling runs redis-benchmark -P 16 with EVALSHA of p's script over random identities,
// with the keys and arguments one check of p sends, and returns its calls/s and the
// redis-server CPU per call.
func ceiling(ctx context.Context, rdb *redis.Client, srv *server, c config, p *limiter.Policy) (float64, time.Duration, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, 0, fmt.Errorf("flushall: %w", err)
	}
	sha, err := rdb.ScriptLoad(ctx, p.Script().Source).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("script load: %w", err)
	}
	keys := p.Keys("user-__rand_int__", "")
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(srv.port), "-c", "50", "-P", "16",
		"-n", strconv.Itoa(c.benchCalls), "-r", strconv.Itoa(max(c.identities, 1)), "--csv",
		"EVALSHA", sha, strconv.Itoa(len(keys))}
	args = append(args, keys...)
	for _, a := range p.Args(1, false) {
		args = append(args, fmt.Sprint(a))
	}
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	cpu1, err := redisCPU(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	rps, err := parseBenchmarkCSV(out)
	return rps, (cpu1 - cpu0) / time.Duration(max(c.benchCalls, 1)), err
}

// parseBenchmarkCSV reads the rps column of redis-benchmark --csv output.
func parseBenchmarkCSV(out []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 2 || strings.Contains(f[0], "test") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64); err == nil {
			return v, nil
		}
	}
	return 0, fmt.Errorf("no rps in redis-benchmark output: %q", out)
}

func printReport(w io.Writer, c config, r *report) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	p("sidecar-bench: Envoy RLS v3 over loopback gRPC: %d callers on %d connections, %d identities, %s per row, "+
		"%d stream workers, %d CPUs shared by generator, sidecar and redis-server\n\n",
		c.callers, c.conns, c.identities, c.duration, c.workers, runtime.NumCPU())
	p("| mode | decisions/s | p50 | p99 | admitted | denied | without Redis | other load | ceiling (redis-benchmark -P16 EVALSHA/s) | ratio | target (>= %.0f%% of the larger ceiling, p99 <= %s) |\n",
		100*targetRatio, targetP99)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	// The verdict holds the row against the larger of the measured and the idle ceiling, so
	// a redis-benchmark starved by other processes cannot flatter it.
	ref := max(r.ceiling, r.idleCeiling())
	for _, row := range r.rows {
		ratio := row.perSec / r.ceiling
		verdict := "met"
		if row.perSec/ref < targetRatio || row.p99 > targetP99 {
			verdict = "missed"
		}
		p("| %s | %.0f | %s | %s | %d | %d | %d | %s | %.0f | %.1f%% | %s |\n", row.name, row.perSec,
			ms(row.p50), ms(row.p99), row.admitted, row.denied, row.fallbacks, percent(row.otherLoad),
			r.ceiling, 100*ratio, verdict)
	}
	printCPU(p, r)
	if h := r.hot; h != nil {
		p("\n| hot identity (deny cache on, pipelining on) | decisions | decisions/s | p99 | denied | other load | EVALSHA calls in Redis | retry-after |\n")
		p("|---|---:|---:|---:|---:|---:|---:|---:|\n")
		p("| one identity over its limit for %s | %d | %.0f | %s | %d | %s | %d | %s |\n", c.hotDuration, h.calls,
			h.perSec, ms(h.p99), h.denied, percent(h.otherLoad), h.evalsha, h.retryAfter.Round(time.Millisecond))
	}
}

// idleCeiling is the ceiling Redis would reach with a core to itself: 1s over its CPU per
// EVALSHA under redis-benchmark; 0 when unknown.
func (r *report) idleCeiling() float64 {
	if r.ceilingCPU <= 0 {
		return 0
	}
	return float64(time.Second) / float64(r.ceilingCPU)
}

// printCPU prints the CPU accounting, which other processes on a shared machine do not
// skew: the decisions/s the CPUs would carry if generator, sidecar and Redis had them all,
// against the ceiling Redis would reach with a core to itself.
func printCPU(p func(string, ...any), r *report) {
	idleCeiling := r.idleCeiling()
	p("\n| mode | CPU/decision sidecar+generator | CPU/decision Redis | allocated/decision | decisions/s on %d idle CPUs | idle ceiling (Redis CPU %s/EVALSHA) | ratio |\n",
		runtime.NumCPU(), us(r.ceilingCPU))
	p("|---|---:|---:|---:|---:|---:|---:|\n")
	rows := r.rows
	if r.hot != nil {
		rows = append(slices.Clip(rows), row{name: "hot identity (no Redis)", stats: r.hot.stats})
	}
	for _, row := range rows {
		capacity := float64(runtime.NumCPU()) * float64(time.Second) / float64(max(row.cpu+row.redisCPU, 1))
		p("| %s | %s | %s | %d B | %.0f | %.0f | %s |\n", row.name, us(row.cpu), us(row.redisCPU), row.allocs,
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

// server is a redis-server this command started on loopback; stop ends it by its PID.
type server struct {
	cmd  *exec.Cmd
	dir  string
	port int
}

// redisServerBin is redis-server from REDIS_SERVER_BIN (as the test harness reads it) or PATH.
func redisServerBin() string {
	if p := os.Getenv("REDIS_SERVER_BIN"); p != "" {
		return p
	}
	return "redis-server"
}

func startServer() (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pick a port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "ratelimit-sidecar-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	cmd := exec.Command(redisServerBin(), "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &server{cmd: cmd, dir: dir, port: port}
	if err := s.waitReady(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *server) waitReady() error {
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
	defer func() { _ = c.Close() }()
	var err error
	for range 200 {
		if err = c.Ping(context.Background()).Err(); err == nil {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d did not answer: %w", s.port, err)
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// stop sends SIGTERM to the server's PID, then SIGKILL after 5s, and removes its directory.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(s.dir)
}
