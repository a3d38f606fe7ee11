package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchredis"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/forwardauthbench"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/rls"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// report is everything one run measured.
type report struct {
	machine    machine
	rows       []*row
	controller controllerResult
	gateways   forwardauthbench.Result
	gatewayErr error
	cluster    []clusterRow
	clusterErr error
	hot        []*hotRow
	cold       coldResult
	hotErr     error
	shards     []shardRow
	shardErr   error
	fcall      *fcallReplicas // nil: not run (-fcall-replicas=false)
	loadEnd    string
	elapsed    time.Duration
}

// row is one script: an algorithm, or the baseline fixture (alg empty).
type row struct {
	name     string
	alg      limiter.Algorithm
	policy   *limiter.Policy // as the controller compiles it; nil for the baseline
	route    string          // the gRPC front's route to policy
	ceilings []benchredis.Ceiling
	direct   []load.Stats // Go limiter, pipelined, config.callers
	wide     []load.Stats // the same with config.wideCallers
	grpc     []load.Stats // sidecar's RLS gRPC front, pipelined
	extauthz []load.Stats // sidecar's ext_authz gRPC front, pipelined, same policy
	// bytesLong and bytesShort are Redis bytes per identity with the default layout, for a
	// 49-character key ({rl:default/api-per-key:user-00001234}:per-second) and a 31-character
	// one ({rl:shop/api:user-00001234}:rps).
	bytesLong, bytesShort float64
	over                  overResult
}

// algorithms in the table's order, with the name of their bench policy and route.
var algorithms = []struct {
	alg  v1alpha1.Algorithm
	name string
}{
	{v1alpha1.AlgorithmTokenBucket, "token-bucket"},
	{v1alpha1.AlgorithmSlidingWindow, "sliding-window"},
	{v1alpha1.AlgorithmFixedWindow, "fixed-window"},
	{v1alpha1.AlgorithmGCRA, "gcra"},
}

// requestsPerSecond is every bench policy's limit per identity: with 10,000 identities far
// above what the callers reach, so almost every check is admitted (and writes).
const requestsPerSecond = 1000

// benchPolicies are the policies of the gRPC front's snapshot, one per algorithm.
func benchPolicies() []rls.Policy {
	var ps []rls.Policy
	for _, a := range algorithms {
		ps = append(ps, rls.Policy{Name: a.name, Route: "/" + a.name, Algorithm: a.alg,
			Requests: requestsPerSecond, Period: time.Second})
	}
	return ps
}

func run(ctx context.Context, c config) (*report, error) {
	rep := &report{machine: readMachine()}
	if err := measureStandalone(ctx, c, rep); err != nil {
		return nil, err
	}
	var errs []error
	if primaries, _ := parsePrimaries(c.cluster); len(primaries) > 0 {
		rep.cluster, rep.clusterErr = measureCluster(ctx, c, primaries)
		errs = append(errs, rep.clusterErr)
	}
	if c.hotKeys {
		rep.shards, rep.shardErr = measureShards(ctx, c)
		errs = append(errs, rep.shardErr)
	}
	if c.fcallReplicas {
		rep.fcall = measureFCallReplicas(ctx, c)
		errs = append(errs, rep.fcall.err)
	}
	if c.gateways {
		progress("forward auth through Caddy and nginx")
		rep.gateways, rep.gatewayErr = forwardauthbench.Run(ctx, forwardauthbench.Config{Duration: c.duration, Runs: c.reps})
		errs = append(errs, rep.gatewayErr)
	}
	if c.controller {
		rep.controller = runController(ctx, c)
		errs = append(errs, rep.controller.err)
	}
	rep.loadEnd = loadAverage()
	return rep, errors.Join(errs...)
}

// newClient is a go-redis client as redisconn builds it, with a pool for the callers.
func newClient(s *redistest.Server, pool int) *redis.Client {
	opts := s.Options()
	opts.PoolSize, opts.ContextTimeoutEnabled = max(pool, 10), true
	return redis.NewClient(opts)
}

func measureStandalone(ctx context.Context, c config, rep *report) (err error) {
	procs := redistest.NewProcs()
	defer func() { err = errors.Join(err, procs.Close()) }()
	srv, err := procs.Server()
	if err != nil {
		return err
	}
	rdb := newClient(srv, c.callers)
	defer func() { _ = rdb.Close() }()
	if rep.machine.redisVersion, err = benchredis.Version(ctx, rdb); err != nil {
		return err
	}
	store, err := rls.NewStore(benchPolicies()...)
	if err != nil {
		return err
	}
	rep.rows = []*row{{name: "baseline (HMGET+HMSET+PEXPIRE)"}}
	for _, a := range algorithms {
		rep.rows = append(rep.rows, &row{name: string(a.alg), alg: limiter.Algorithm(a.alg),
			policy: store.Current().Rule(a.name).Policy, route: "/" + a.name})
	}
	// Repetitions go round all rows, so that a burst of other load on a shared machine
	// lands on one run of several rows rather than on every run of one.
	for i := range max(c.reps, 1) {
		for _, r := range rep.rows {
			progress("run %d/%d: %s", i+1, c.reps, r.name)
			if err := measureRun(ctx, c, rdb, srv.Port(), store, r); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
		}
	}
	for _, r := range rep.rows {
		progress("bytes per identity and over-admission: %s", r.name)
		if err := measureOnce(ctx, c, srv, rdb, r); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	if c.hotKeys {
		rep.hot, rep.cold, rep.hotErr = measureHotKeys(ctx, c, srv, rdb)
	}
	return rep.hotErr
}

// measureRun adds one run of every throughput cell of r: the redis-benchmark ceiling (and
// Redis µs per call), the pipelined limiter and the gRPC front.
func measureRun(ctx context.Context, c config, rdb *redis.Client, port int, store *engine.Store, r *row) error {
	ceil, err := benchredis.Benchmark(ctx, rdb, port, ceilingSpec(c, r))
	if err != nil {
		return err
	}
	r.ceilings = append(r.ceilings, ceil)
	if r.policy == nil {
		return nil
	}
	var direct, wide load.Stats
	pprof.Do(ctx, pprof.Labels("part", "limiter"), func(ctx context.Context) {
		direct, err = measureDirect(ctx, c, c.callers, rdb, r.policy)
		if err == nil && c.wideCallers > 0 {
			wide, err = measureDirect(ctx, c, c.wideCallers, rdb, r.policy)
		}
	})
	if err != nil {
		return fmt.Errorf("limiter: %w", err)
	}
	r.direct = append(r.direct, direct)
	progress("  limiter, %d callers: %s", c.callers, cpuLine(direct))
	if c.wideCallers > 0 {
		r.wide = append(r.wide, wide)
		progress("  limiter, %d callers: %s", c.wideCallers, cpuLine(wide))
	}
	for _, f := range []struct {
		name  string
		runs  *[]load.Stats
		calls func(*rls.Sidecar) load.Caller
	}{
		{"RLS", &r.grpc, func(s *rls.Sidecar) load.Caller { return s.Caller(rls.Requests(r.route, c.identities)) }},
		{"ext_authz", &r.extauthz, func(s *rls.Sidecar) load.Caller { return s.CheckCaller(rls.CheckRequests(r.route, c.identities)) }},
	} {
		var st load.Stats
		pprof.Do(ctx, pprof.Labels("part", "grpc", "front", f.name), func(ctx context.Context) {
			st, err = measureGRPC(ctx, c, rdb, store, f.calls)
		})
		if err != nil {
			return fmt.Errorf("%s gRPC front: %w", f.name, err)
		}
		*f.runs = append(*f.runs, st)
		progress("  %s gRPC, %d callers: %s", f.name, c.callers, cpuLine(st))
	}
	return nil
}

// ceilingSpec is redis-benchmark running the script of r with the keys and arguments one
// check sends, over random identities.
func ceilingSpec(c config, r *row) benchredis.BenchmarkSpec {
	spec := benchredis.BenchmarkSpec{Calls: c.benchCalls, Identities: c.identities}
	if r.policy == nil {
		spec.Source = baselineSrc
		spec.Keys = []string{"{rl:bench/baseline:user-__rand_int__}:rate"}
		rps := strconv.Itoa(requestsPerSecond)
		spec.Args = []string{rps, rps, "1", "2000"} // refill/s, capacity, cost, ttl ms
		return spec
	}
	spec.Source, spec.Keys = r.policy.Script().Source, r.policy.Keys("user-__rand_int__", "")
	for _, a := range r.policy.Args(limiter.Request{Cost: 1}) {
		spec.Args = append(spec.Args, fmt.Sprint(a))
	}
	return spec
}

// warmup is the unmeasured run before each measured one: pools filled, stacks grown.
func warmup(c config) time.Duration { return min(c.duration/10, time.Second) }

// measureDirect drives a pipelining limiter on rdb with p from callers goroutines.
func measureDirect(ctx context.Context, c config, callers int, rdb redis.UniversalClient, p *limiter.Policy) (load.Stats, error) {
	if err := flushAll(ctx, rdb); err != nil {
		return load.Stats{}, err
	}
	l, err := limiter.New(rdb, limiter.Options{Pipelining: true, Workers: c.workers, Timeout: time.Second})
	if err != nil {
		return load.Stats{}, fmt.Errorf("limiter: %w", err)
	}
	defer l.Close()
	ids := identities(c.identities)
	call := func(ctx context.Context, _ int, rng *rand.Rand) (load.Outcome, error) {
		return outcome(l.Check(ctx, p, limiter.Request{Identity: ids[rng.IntN(len(ids))]})), nil
	}
	if _, err := load.Drive(ctx, callers, warmup(c), call); err != nil {
		return load.Stats{}, err
	}
	return measurePipelined(ctx, c, callers, l, call, rdb)
}

// measurePipelined is load.Measure of call, with the mean batch size of l's pipelines.
func measurePipelined(ctx context.Context, c config, callers int, l *limiter.Limiter, call load.Caller, rdb redis.UniversalClient) (load.Stats, error) {
	batches0, checks0 := l.PipelineStats()
	s, err := load.Measure(ctx, callers, c.duration, call, redisCPU(rdb))
	if batches1, checks1 := l.PipelineStats(); batches1 > batches0 {
		s.Batch = float64(checks1-checks0) / float64(batches1-batches0)
	}
	return s, err
}

// redisCPU reads the CPU time of every primary rdb reaches, for load.Measure.
func redisCPU(rdb redis.UniversalClient) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			return clusterCPU(ctx, cc)
		}
		return benchredis.CPU(ctx, rdb)
	}
}

// measureGRPC drives one of the sidecar's gRPC fronts (pipelining on) with the caller calls
// builds on the sidecar.
func measureGRPC(ctx context.Context, c config, rdb *redis.Client, store *engine.Store, calls func(*rls.Sidecar) load.Caller) (load.Stats, error) {
	if err := flushAll(ctx, rdb); err != nil {
		return load.Stats{}, err
	}
	s, err := rls.Start(rls.Config{Client: rls.Client(c.client), Conns: c.conns, StreamWorkers: c.streamWorkers}, rdb, store,
		limiter.Options{Pipelining: true, Workers: c.workers, Timeout: time.Second})
	if err != nil {
		return load.Stats{}, err
	}
	defer s.Stop()
	call := calls(s)
	if _, err := load.Drive(ctx, c.callers, warmup(c), call); err != nil {
		return load.Stats{}, err
	}
	return measurePipelined(ctx, c, c.callers, s.Limiter(), call, rdb)
}

func outcome(d limiter.Decision) load.Outcome {
	switch {
	case d.WithoutRedis():
		return load.Fallback
	case d.Allowed:
		return load.Admitted
	default:
		return load.Denied
	}
}

func identities(n int) []string {
	ids := make([]string, max(n, 1))
	for i := range ids {
		ids[i] = rls.Identity(i)
	}
	return ids
}

// flushAll empties every primary rdb reaches.
func flushAll(ctx context.Context, rdb redis.UniversalClient) error {
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
	} else {
		err = rdb.FlushAll(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("flushall: %w", err)
	}
	return nil
}

// measureOnce adds the figures that need one measurement: bytes per identity and
// over-admission.
func measureOnce(ctx context.Context, c config, srv *redistest.Server, rdb *redis.Client, r *row) error {
	var err error
	if r.bytesLong, err = bytesPerIdentity(ctx, c, rdb, r.alg, "default", "api-per-key", "per-second"); err != nil {
		return err
	}
	if r.bytesShort, err = bytesPerIdentity(ctx, c, rdb, r.alg, "shop", "api", "rps"); err != nil {
		return err
	}
	r.over, err = overAdmission(ctx, c, srv, r.alg)
	return err
}

// bytesTTL is the TTL of the keys whose memory is measured: long enough that none expires
// before it is counted (any TTL costs the same bytes).
const bytesTTL = time.Hour

// bytesPerIdentity is Redis memory per identity after one check of each of c.identities
// identities with a 100/s policy in the default key layout named namespace/name, limit
// limitName; for the baseline (alg empty) one baseline call on the same key.
func bytesPerIdentity(ctx context.Context, c config, rdb *redis.Client, alg limiter.Algorithm, namespace, name, limitName string) (float64, error) {
	if alg == "" {
		script := redis.NewScript(baselineSrc)
		return benchredis.BytesPerIdentity(ctx, rdb, c.identities, func(i int) error {
			key := "{rl:" + namespace + "/" + name + ":" + rls.Identity(i) + "}:" + limitName
			return script.Run(ctx, rdb, []string{key}, requestsPerSecond, requestsPerSecond, 1, bytesTTL.Milliseconds()).Err()
		})
	}
	p, err := newPolicy(alg, namespace, name, limiter.Limit{Name: limitName, Requests: requestsPerSecond, Period: time.Second},
		bytesTTL, limiter.FailOpen)
	if err != nil {
		return 0, err
	}
	l, err := limiter.New(rdb, limiter.Options{Timeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("limiter: %w", err)
	}
	defer l.Close()
	return benchredis.BytesPerIdentity(ctx, rdb, c.identities, func(i int) error {
		if d := l.Check(ctx, p, limiter.Request{Identity: rls.Identity(i)}); d.WithoutRedis() {
			return fmt.Errorf("check without Redis: %w", d.Err)
		}
		return nil
	})
}

// newPolicy is a single-limit policy with the default key layout (as policy.Rules{}.StateKey
// builds it) and ttl, or the shortest TTL that keeps the algorithm exact if that is longer.
func newPolicy(alg limiter.Algorithm, namespace, name string, lim limiter.Limit, ttl time.Duration, mode limiter.FailureMode) (*limiter.Policy, error) {
	key := "{rl:${namespace}/${policy}:${identity}}:${limit}"
	limits := []limiter.Limit{lim}
	p, err := limiter.NewPolicy(limiter.Spec{Namespace: namespace, Name: name, Algorithm: alg,
		Limits: limits, StateKey: key, TTL: max(ttl, limiter.Horizon(alg, limits)), FailureMode: mode})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}

// progress reports what is being measured, on stderr.
// cpuLine is where one run's time went: its rate, CPU per call of this process (generator and
// whatever it serves) and of redis-server, and bytes allocated per call.
func cpuLine(s load.Stats) string {
	return fmt.Sprintf("%.0f/s, this process %.1f µs/call, redis-server %.1f µs/call, %d B allocated/call, %.1f checks/pipeline",
		s.PerSec, micros(s.CPU), micros(s.RedisCPU), s.Allocs, s.Batch)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
