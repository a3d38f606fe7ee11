// Command limiter-bench is `make bench`: it measures every limiter algorithm on one local
// redis-server, in one run, and prints one markdown table: Redis µs per call (INFO
// commandstats) against a straightforward HMGET+HMSET+PEXPIRE token bucket (the baseline
// fixture), the redis-benchmark -P 16 EVALSHA ceiling, decisions/s and p50/p99 of the Go
// limiter (pipelined) and of the sidecar's two gRPC fronts, Envoy RLS and Envoy ext_authz, on
// the same policies (test/bench/internal/rls),
// Redis bytes per identity (MEMORY USAGE), and over-admission under 64-way concurrency.
// Below it: the targets met or missed, forward auth through real Caddy and nginx against a
// direct-upstream baseline (test/bench/internal/forwardauthbench), the controller's bulk apply (BenchmarkBulkApply in
// test/integration/controller, run with `go test`), and decisions/s on Redis Cluster with 1, 2 and
// 3 primaries, the hot-key sections (leases), and the section of issue 25 (-fcall-replicas):
// the tenant call path, FCALL, against EVALSHA; leases across a failover with a lagging
// replica; and what the replicas' acknowledgement of leases costs. Every throughput and
// latency cell is the median of -reps short runs.
//
// It exits non-zero when any algorithm admits more than its limit (over-admission), when
// leases admit more across a failover than the same failover without them, or when a part
// fails. -update-doc replaces the results block of docs/benchmarks.md with the output.
// docs/benchmarks.md describes every column.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/rls"
)

//go:embed baseline_token_bucket.lua
var baselineSrc string

type config struct {
	duration      time.Duration
	reps          int
	callers       int
	wideCallers   int
	identities    int
	benchCalls    int
	workers       int
	conns         int
	client        string
	streamWorkers int
	overLimit     int
	overClients   int
	overCallers   int
	cluster       string
	controller    bool
	hotKeys       bool
	fcallReplicas bool
	gateways      bool
	envtestPkg    string
	updateDoc     string
	cpuProfile    string
}

func defaultConfig() config {
	return config{duration: 2 * time.Second, reps: 3, callers: 64, wideCallers: 256, identities: 10000, benchCalls: 150000,
		conns: 2, client: string(rls.Lean), streamWorkers: 64, overLimit: 1000, overClients: 8, overCallers: 64,
		cluster: "1,2,3", controller: true, hotKeys: true, fcallReplicas: true, gateways: true, envtestPkg: "./test/integration/controller/"}
}

func main() {
	if runHotWorker() { // re-run as one sidecar of the hot-key section
		return
	}
	c := defaultConfig()
	flag.DurationVar(&c.duration, "duration", c.duration, "length of one throughput run (each cell is the median of -reps runs)")
	flag.IntVar(&c.reps, "reps", c.reps, "runs per cell; the table shows the median")
	flag.IntVar(&c.callers, "callers", c.callers, "concurrent callers of the limiter and of each gRPC front (RLS, ext_authz)")
	flag.IntVar(&c.wideCallers, "limiter-callers", c.wideCallers,
		"concurrent callers of the limiter's second run, nearer the ceiling's 50x16 = 800 calls in flight; 0 skips it")
	flag.IntVar(&c.identities, "identities", c.identities, "distinct identities the callers pick from at random")
	flag.IntVar(&c.benchCalls, "redis-benchmark-calls", c.benchCalls, "calls per redis-benchmark run")
	flag.IntVar(&c.workers, "pipeline-workers", c.workers, "limiter pipelines in flight (limiter.Options.Workers; 0: its default)")
	flag.StringVar(&c.client, "grpc-client", c.client, "load client of the gRPC fronts: lean (test/bench/internal/h2grpc, standing in for Envoy) or grpc-go")
	flag.IntVar(&c.conns, "conns", c.conns, "gRPC client connections the callers share")
	flag.IntVar(&c.streamWorkers, "stream-workers", c.streamWorkers, "gRPC server stream workers (0: a goroutine per call)")
	flag.IntVar(&c.overLimit, "overadmit-limit", c.overLimit, "L: the limit hammered in the over-admission check (no refill during the check)")
	flag.IntVar(&c.overClients, "overadmit-clients", c.overClients, "separate Redis clients (and limiters) in the over-admission check")
	flag.IntVar(&c.overCallers, "overadmit-callers", c.overCallers, "goroutines in the over-admission check, spread over the clients")
	flag.StringVar(&c.cluster, "cluster", c.cluster, "Redis Cluster primaries to measure, comma-separated; empty skips the section")
	flag.BoolVar(&c.hotKeys, "hotkeys", c.hotKeys, "measure the hot-key section: one hot identity through two limiters with leases off and on, over-admission with leases, cold identities")
	flag.BoolVar(&c.fcallReplicas, "fcall-replicas", c.fcallReplicas,
		"measure the tenant call path (FCALL against EVALSHA), leases across a failover with a lagging replica, and what the replicas' acknowledgement of leases costs")
	flag.BoolVar(&c.controller, "controller", c.controller, "run BenchmarkBulkApply (needs KUBEBUILDER_ASSETS; `make bench` sets it)")
	flag.BoolVar(&c.gateways, "gateways", c.gateways, "measure forward auth through real Caddy and nginx against the direct upstream (needs `make proxies`)")
	flag.StringVar(&c.envtestPkg, "envtest-pkg", c.envtestPkg, "package holding BenchmarkBulkApply, relative to the working directory")
	flag.StringVar(&c.updateDoc, "update-doc", c.updateDoc, "also write the output between the <!-- results --> markers of this file (docs/benchmarks.md)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", c.cpuProfile, "write a CPU profile of this process (generator, limiter, gRPC front) to this file")
	flag.Parse()
	if c.cpuProfile != "" {
		stop, err := startCPUProfile(c.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "limiter-bench:", err)
			os.Exit(1)
		}
		defer stop()
	}
	if err := benchMain(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "limiter-bench:", err)
		os.Exit(1) //nolint:gocritic // the profile of a failed run is not wanted
	}
}

// startCPUProfile starts profiling into path; the returned func stops and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// benchMain runs everything, prints the report to w (and into -update-doc), and returns an
// error for over-admission or a failed part, after printing what was measured.
func benchMain(ctx context.Context, c config, w io.Writer) error {
	if _, err := parsePrimaries(c.cluster); err != nil {
		return err
	}
	started := time.Now()
	rep, runErr := run(ctx, c)
	if rep == nil {
		return runErr
	}
	rep.elapsed = time.Since(started)
	var buf bytes.Buffer
	printReport(&buf, c, rep)
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	var errs []error
	if runErr != nil {
		errs = append(errs, runErr)
	}
	if over := rep.overAdmitted(); len(over) > 0 {
		errs = append(errs, fmt.Errorf("over-admission: %s admitted more than the limit", strings.Join(over, ", ")))
	}
	if c.updateDoc != "" && len(errs) == 0 {
		if err := updateDoc(c.updateDoc, buf.String()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parsePrimaries reads -cluster: "1,2,3" → [1 2 3]; empty → none.
func parsePrimaries(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("-cluster: %q is not a number of primaries from 1 to 16", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Markers around the results block of docs/benchmarks.md.
const (
	beginMarker = "<!-- results -->"
	endMarker   = "<!-- /results -->"
)

// updateDoc replaces what lies between the markers in path with report.
func updateDoc(path, report string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("update doc: %w", err)
	}
	out, err := replaceResults(string(data), report)
	if err != nil {
		return fmt.Errorf("update doc %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return fmt.Errorf("update doc: %w", err)
	}
	return nil
}

func replaceResults(doc, report string) (string, error) {
	begin, end := markerLine(doc, beginMarker, 0), -1
	if begin >= 0 {
		end = markerLine(doc, endMarker, begin)
	}
	if begin < 0 || end < 0 {
		return "", fmt.Errorf("no %s line followed by a %s line", beginMarker, endMarker)
	}
	return doc[:begin] + beginMarker + "\n\n" + strings.TrimSpace(report) + "\n\n" + doc[end:], nil
}

// markerLine is the offset of the first line at or after from that is marker alone, or -1:
// a marker quoted in the prose does not count.
func markerLine(doc, marker string, from int) int {
	for off := from; off < len(doc); {
		line, _, _ := strings.Cut(doc[off:], "\n")
		if strings.TrimSpace(line) == marker {
			return off
		}
		off += len(line) + 1
	}
	return -1
}
