package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/failover"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestMain lets the hot-key section re-run this test binary as its worker processes.
func TestMain(m *testing.M) {
	if runHotWorker() {
		return
	}
	os.Exit(m.Run())
}

// requireTools skips (fails under CI) without redis-server and redis-benchmark.
func requireTools(t *testing.T) {
	t.Helper()
	t.Setenv(redistest.ServerBinEnv, redistest.RequireRedis(t)) // the binary the harness found
	missing.Tool(t, "redis-benchmark", "it comes with redis-tools (`make redis`)")
}

// smallConfig is the default configuration with tiny numbers: reps repetitions, Redis
// Clusters of the sizes in cluster, no controller section, no gateway section (the
// forwardauthbench package tests its own run) and no -fcall-replicas section (TestMeasure
// runs it). It skips (fails under CI) the test without redis-server and redis-benchmark.
func smallConfig(t *testing.T, reps int, cluster string) config {
	t.Helper()
	requireTools(t)
	c := defaultConfig()
	c.duration, c.reps, c.callers, c.wideCallers, c.identities, c.benchCalls = 150*time.Millisecond, reps, 8, 16, 50, 3000
	c.overLimit, c.overClients, c.overCallers = 40, 4, 16
	c.cluster, c.controller, c.gateways, c.fcallReplicas = cluster, false, false, false
	return c
}

// TestRunSmall runs the whole command with tiny numbers against real redis-server processes
// (standalone and a Cluster of 1 and 2 primaries), so that it keeps working between the
// times someone runs it for figures. The controller section is left to `make bench`: it
// needs the envtest control plane.
func TestRunSmall(t *testing.T) {
	c := smallConfig(t, 2, "1,2")
	doc := t.TempDir() + "/benchmarks.md"
	if err := os.WriteFile(doc, []byte("# b\n\n<!-- results -->\nold\n<!-- /results -->\ntail\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.updateDoc = doc
	var out bytes.Buffer
	if err := benchMain(context.Background(), c, &out); err != nil {
		t.Fatalf("benchMain: %v\n%s", err, out.String())
	}
	report := out.String()
	for _, want := range []string{"| TokenBucket ", "| SlidingWindow ", "| FixedWindow ", "| GCRA ", "| baseline (HMGET+HMSET+PEXPIRE) ",
		"ext_authz gRPC /s", "### Targets", "Not run (-controller=false)", "### Redis Cluster", "redis-server 7.", "### Hot keys: leases", "Cold identities", "### Hot keys: a global limit sharded"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(data); !strings.Contains(got, "| GCRA ") || strings.Contains(got, "\nold\n") || !strings.HasSuffix(got, "<!-- /results -->\ntail\n") {
		t.Errorf("-update-doc wrote:\n%s", got)
	}
}

// TestMeasure checks the figures behind the table on a small run, the -fcall-replicas
// section's included.
func TestMeasure(t *testing.T) {
	c := smallConfig(t, 1, "2")
	c.fcallReplicas = true
	rep, err := run(context.Background(), c)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(rep.rows) != 5 {
		t.Fatalf("%d rows, want baseline and 4 algorithms", len(rep.rows))
	}
	for _, r := range rep.rows {
		checkRow(t, c, r)
	}
	if len(rep.cluster) != 1 || rep.cluster[0].primaries != 2 || rep.cluster[0].stat.Calls == 0 ||
		rep.cluster[0].busiest <= 0 || rep.cluster[0].busiest >= 1 {
		t.Errorf("cluster rows %+v, want one of 2 primaries sharing the calls", rep.cluster)
	}
	checkFCallReplicas(t, rep.fcall)
	var out bytes.Buffer
	printReport(&out, c, rep)
	for _, want := range []string{"### Tenant mode and leases with replicas", "| GCRA ", "leases' excess", "| 1 replica, healthy link (WAIT 1) "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// checkRow wants positive figures, an exact limit under concurrency, and no check decided
// without Redis.
func checkRow(t *testing.T, c config, r *row) {
	t.Helper()
	if ceil := r.ceiling(); ceil.PerSec <= 0 || ceil.UsecCall <= 0 {
		t.Errorf("%s: ceiling %+v, want positive figures", r.name, ceil)
	}
	if r.bytesLong < r.bytesShort || r.bytesShort <= 0 {
		t.Errorf("%s: %.0f B per identity for the long key, %.0f for the short one; want 0 < short <= long", r.name, r.bytesLong, r.bytesShort)
	}
	if r.over.runs != 1 || r.over.admitted != c.overLimit {
		t.Errorf("%s: over-admission %+v, want exactly %d admitted", r.name, r.over, c.overLimit)
	}
	if r.policy != nil {
		checkRuns(t, r)
	}
}

// checkRuns wants every throughput run of r to have been decided by Redis.
func checkRuns(t *testing.T, r *row) {
	t.Helper()
	if len(r.direct) == 0 || len(r.wide) != len(r.direct) || len(r.grpc) == 0 || len(r.extauthz) != len(r.grpc) {
		t.Errorf("%s: %d + %d limiter runs, %d RLS and %d ext_authz gRPC runs", r.name, len(r.direct), len(r.wide), len(r.grpc), len(r.extauthz))
	}
	for _, s := range slices.Concat(r.direct, r.wide, r.grpc, r.extauthz) {
		if s.Calls == 0 || s.Admitted == 0 || s.Fallbacks != 0 || s.P99 < s.P50 || s.Batch < 1 {
			t.Errorf("%s: %+v, want every call decided by Redis", r.name, s)
		}
	}
}

// checkFCallReplicas wants every part of the -fcall-replicas section measured: both call
// paths of every algorithm, the limiter with functions off and on, failovers that lost only
// the checks made in the lag, and lease calls on both primaries.
func checkFCallReplicas(t *testing.T, f *fcallReplicas) {
	t.Helper()
	if f == nil || f.err != nil || len(f.paths) != 4 || len(f.failovers) != 4 || len(f.acks) != 2 {
		t.Fatalf("-fcall-replicas section %+v, want every part measured", f)
	}
	checkCallPaths(t, f)
	checkFailovers(t, f.failovers)
	for _, r := range f.acks {
		if len(r.runs) != 1 || r.runs[0].leases == 0 || r.runs[0].leaseP50 <= 0 {
			t.Errorf("%s: %+v, want lease calls timed", r.name, r.runs)
		}
	}
}

// checkCallPaths wants positive figures for both call paths of every algorithm, and
// admitted checks through the limiter with functions off and on.
func checkCallPaths(t *testing.T, f *fcallReplicas) {
	t.Helper()
	for _, r := range f.paths {
		if e, fc := medianCeiling(r.evalsha), medianCeiling(r.fcall); e.UsecCall <= 0 || fc.UsecCall <= 0 || fc.PerSec <= 0 {
			t.Errorf("%s: EVALSHA %+v, FCALL %+v, want positive figures", r.alg, e, fc)
		}
	}
	if len(f.functions.on) != 1 || f.functions.on[0].Admitted == 0 || f.functions.off[0].Admitted == 0 {
		t.Errorf("limiter with Spec.Functions off %+v, on %+v, want admitted checks", f.functions.off, f.functions.on)
	}
}

// checkFailovers wants every failover to have lost only the checks made in the lag, and no
// more with leases.
func checkFailovers(t *testing.T, rows []failoverRow) {
	t.Helper()
	for _, r := range rows {
		if r.without < failover.ScenarioLimit || r.without > failover.ScenarioLimit+failover.ScenarioLag || r.excess() != 0 {
			t.Errorf("%s failover: %d admitted without leases, %d with; want %d to %d, and no more with leases",
				r.alg, r.without, r.with, failover.ScenarioLimit, failover.ScenarioLimit+failover.ScenarioLag)
		}
	}
}

func TestOverAdmissionFails(t *testing.T) {
	rep := &report{rows: []*row{
		{name: "baseline", over: overResult{limit: 10, admitted: 10, runs: 1}},
		{name: "TokenBucket", alg: "TokenBucket", over: overResult{limit: 10, admitted: 13, runs: 3}},
	}}
	if got := rep.overAdmitted(); len(got) != 1 || got[0] != "TokenBucket (+3)" {
		t.Errorf("overAdmitted = %q, want [TokenBucket (+3)]", got)
	}
	rep.fcall = &fcallReplicas{failovers: []failoverRow{{alg: "GCRA", without: 105, with: 105}, {alg: "FixedWindow", without: 105, with: 130}}}
	if got := rep.overAdmitted(); len(got) != 2 || !strings.HasPrefix(got[1], "FixedWindow leases across a failover (+25") {
		t.Errorf("overAdmitted = %q, want the FixedWindow failover's excess too", got)
	}
	var out bytes.Buffer
	printReport(&out, defaultConfig(), rep)
	if !strings.Contains(out.String(), "+3 MISSED") {
		t.Errorf("report does not show the over-admission as missed:\n%s", out.String())
	}
}

func TestParseBenchOutput(t *testing.T) {
	out := `{"level":"info","msg":"noise"}
goos: linux
BenchmarkBulkApply-2   	       1	18517396514 ns/op	         3.091 api-requests/policy	        50.00 configmap-writes	        18.52 s-to-all-ready	      9289 snapshot-bytes-max
--- BENCH: BenchmarkBulkApply-2
    bench_test.go:91: 1000 policies in 50 namespaces: all Ready after 18.517s; largest snapshot 9289 bytes
PASS
`
	m, detail := parseBenchOutput(out, "BenchmarkBulkApply")
	if m["s-to-all-ready"] != 18.52 || m["snapshot-bytes-max"] != 9289 || m["configmap-writes"] != 50 {
		t.Errorf("metrics %v", m)
	}
	if !strings.HasPrefix(detail, "1000 policies in 50 namespaces") {
		t.Errorf("detail %q", detail)
	}
}

func TestReplaceResults(t *testing.T) {
	got, err := replaceResults("a\n<!-- results -->\nold\n<!-- /results -->\nb\n", "new\n")
	if err != nil || got != "a\n<!-- results -->\n\nnew\n\n<!-- /results -->\nb\n" {
		t.Errorf("replaceResults = %q, %v", got, err)
	}
	quoted := "the `<!-- results -->` and `<!-- /results -->` markers\n<!-- results -->\nold\n<!-- /results -->\n"
	if got, err := replaceResults(quoted, "new"); err != nil || got != "the `<!-- results -->` and `<!-- /results -->` markers\n<!-- results -->\n\nnew\n\n<!-- /results -->\n" {
		t.Errorf("replaceResults with quoted markers = %q, %v", got, err)
	}
	if _, err := replaceResults("no markers", "x"); err == nil {
		t.Error("replaceResults without markers: no error")
	}
}

func TestParsePrimaries(t *testing.T) {
	if got, err := parsePrimaries(" 1, 3"); err != nil || len(got) != 2 || got[1] != 3 {
		t.Errorf("parsePrimaries = %v, %v", got, err)
	}
	if got, err := parsePrimaries(""); err != nil || len(got) != 0 {
		t.Errorf("parsePrimaries(\"\") = %v, %v", got, err)
	}
	if _, err := parsePrimaries("0"); err == nil {
		t.Error("parsePrimaries(0): no error")
	}
}
