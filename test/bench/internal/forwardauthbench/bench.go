// Package forwardauthbench measures the forward-auth front behind real proxies: requests/s
// and p99 at a closed-loop client going through real Caddy (the shipped Caddyfile) and real
// nginx (the shipped nginx.conf) to an upstream, each request first judged by the sidecar's
// forward-auth front, against the same client on the upstream directly and on the
// forward-auth endpoint alone, in the same run. Everything is on loopback and shares the
// machine's CPUs: redis-server, the front and the upstream (this process), the proxy and the
// client, so the figures compare the paths rather than state a ceiling.
package forwardauthbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/forwardauth"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/benchstore"
	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/load"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// Config is one benchmark run.
type Config struct {
	// Duration of each measurement (default 2s).
	Duration time.Duration
	// Runs per path; the row is the median by requests/s (default 3).
	Runs int
	// Callers are the concurrent closed-loop clients (default 32).
	Callers int
	// Identities are the distinct X-API-Key values the callers spread over (default 10000).
	Identities int
	// RepoRoot is where config/gateways is read from (default: found from the working
	// directory upwards).
	RepoRoot string
}

func (c Config) withDefaults() (Config, error) {
	if c.Duration <= 0 {
		c.Duration = 2 * time.Second
	}
	c.Runs = max(c.Runs, 1)
	if c.Callers <= 0 {
		c.Callers = 32
	}
	if c.Identities <= 0 {
		c.Identities = 10000
	}
	if c.RepoRoot == "" {
		root, err := repoRoot()
		if err != nil {
			return c, err
		}
		c.RepoRoot = root
	}
	return c, nil
}

// Row is one path's figures.
type Row struct {
	// Path names what the client reached: direct, forward-auth, caddy, nginx.
	Path string
	// PerSec, P50 and P99 are the median run's (by requests/s).
	PerSec   float64
	P50, P99 time.Duration
	// Runs are every run's figures, in order.
	Runs []load.Stats
}

// Result is every path's row, in the order measured.
type Result struct {
	Config Config
	Rows   []Row
}

// namespace and apiPolicy are what the front enforces: one TokenBucket policy on /api per
// X-API-Key, its limit far above what a run sends, so every request is judged by Redis and
// admitted.
const namespace = "bench"

func apiPolicy() *v1alpha1.RateLimitPolicy {
	p := policytest.New(namespace, "api", policytest.OnMissing(v1alpha1.MissingIdentityShared),
		policytest.Limit("per-minute", 1_000_000, time.Minute), policytest.FailureMode(v1alpha1.FailureModeFailOpen))
	(policy.Rules{}).Default(p)
	return p
}

// Run starts redis-server, the forward-auth front and an upstream in this process, Caddy
// and nginx with the shipped recipes, and measures each path cfg.Runs times. Caddy and nginx
// must be on PATH (make proxies); redis-server too (make redis).
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	res := Result{Config: cfg}
	procs := redistest.NewProcs()
	defer func() { _ = procs.Close() }()
	srv, err := procs.Server()
	if err != nil {
		return res, fmt.Errorf("redis-server: %w", err)
	}
	rdb := redis.NewClient(srv.Options())
	defer func() { _ = rdb.Close() }()
	front, stopFront, err := startFront(rdb)
	if err != nil {
		return res, err
	}
	defer stopFront()
	upstream, stopUpstream, err := serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	if err != nil {
		return res, err
	}
	defer stopUpstream()
	caddy, err := startCaddy(ctx, cfg.RepoRoot, front, upstream)
	if err != nil {
		return res, err
	}
	defer caddy.stop()
	nginx, err := startNginx(ctx, cfg.RepoRoot, front, upstream)
	if err != nil {
		return res, err
	}
	defer nginx.stop()

	paths := []struct {
		name string
		url  string
		fa   bool // the forward-auth endpoint itself: state the request as Caddy does
	}{
		{"direct", "http://" + upstream + "/api/items", false},
		{"forward-auth", "http://" + front + forwardauth.ForwardAuthPath, true},
		{"caddy", "http://" + caddy.addr + "/api/items", false},
		{"nginx", "http://" + nginx.addr + "/api/items", false},
	}
	for _, p := range paths {
		row, err := measure(ctx, cfg, p.name, p.url, p.fa)
		if err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// measure runs one path cfg.Runs times and keeps the median run.
func measure(ctx context.Context, cfg Config, name, url string, fa bool) (Row, error) {
	tr := &http.Transport{MaxIdleConns: cfg.Callers, MaxIdleConnsPerHost: cfg.Callers, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	call := func(ctx context.Context, _ int, rng *rand.Rand) (load.Outcome, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-API-Key", "user-"+strconv.Itoa(rng.IntN(cfg.Identities)))
		if fa {
			req.Header.Set("X-Forwarded-Method", http.MethodGet)
			req.Header.Set("X-Forwarded-Uri", "/api/items")
			req.Header.Set("X-Forwarded-Host", "bench.example")
			req.Header.Set("X-Forwarded-For", "127.0.0.1")
		}
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return load.Fallback, nil // the measurement ended mid-request
			}
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return load.Admitted, nil
		case http.StatusTooManyRequests:
			return load.Denied, nil
		}
		return 0, fmt.Errorf("%s: status %d", name, resp.StatusCode)
	}
	row := Row{Path: name}
	for range cfg.Runs {
		s, err := load.Drive(ctx, cfg.Callers, cfg.Duration, call)
		if err != nil {
			return row, err
		}
		row.Runs = append(row.Runs, s)
	}
	sorted := slices.Clone(row.Runs)
	slices.SortFunc(sorted, func(a, b load.Stats) int {
		switch {
		case a.PerSec < b.PerSec:
			return -1
		case a.PerSec > b.PerSec:
			return 1
		}
		return 0
	})
	med := sorted[len(sorted)/2]
	row.PerSec, row.P50, row.P99 = med.PerSec, med.P50, med.P99
	return row, nil
}

// startFront serves the forward-auth front on loopback over an engine on rdb.
func startFront(rdb *redis.Client) (addr string, stop func(), err error) {
	store, err := benchstore.Load(namespace, apiPolicy())
	if err != nil {
		return "", nil, err
	}
	lim, err := limiter.New(rdb, limiter.Options{Timeout: time.Second, Pipelining: true})
	if err != nil {
		return "", nil, fmt.Errorf("limiter: %w", err)
	}
	eng := &engine.Engine{Store: store, Metrics: engine.NewMetrics(prometheus.NewRegistry())}
	eng.SetLimiter(lim)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	srv := forwardauth.NewServer(eng, loopback, httpserver.DefaultLimits(), logr.Discard())
	addr, stopSrv, err := serveWith(srv)
	if err != nil {
		lim.Close()
		return "", nil, err
	}
	return addr, func() { stopSrv(); lim.Close() }, nil
}

// serve serves h on a loopback listener with Go's defaults.
func serve(h http.Handler) (addr string, stop func(), err error) {
	return serveWith(&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second})
}

func serveWith(srv *http.Server) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return lis.Addr().String(), func() { _ = srv.Close() }, nil
}

// Markdown is the result as a table: requests/s, p50 and p99 per path, and each proxy's
// throughput as a share of the direct path's.
func (r Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d callers, %d identities, median of %d × %s per path, all on loopback\n\n",
		r.Config.Callers, r.Config.Identities, r.Config.Runs, r.Config.Duration)
	b.WriteString("| path | requests/s | p50 | p99 | vs direct |\n|---|---:|---:|---:|---:|\n")
	var direct float64
	for _, row := range r.Rows {
		if row.Path == "direct" {
			direct = row.PerSec
		}
		share := "-"
		if direct > 0 {
			share = fmt.Sprintf("%.0f%%", 100*row.PerSec/direct)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s |\n", row.Path, row.PerSec, round(row.P50), round(row.P99), share)
	}
	return b.String()
}

func round(d time.Duration) time.Duration {
	if d > time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
