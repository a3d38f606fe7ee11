package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// controllerResult is BenchmarkBulkApply's figures (test/integration/controller): 1000 policies
// in 50 namespaces applied at once to a manager on a real kube-apiserver and redis-server.
type controllerResult struct {
	ran     bool
	skipped string             // why it did not run
	metrics map[string]float64 // b.ReportMetric unit → value
	detail  string             // the benchmark's own summary line (b.Logf)
	wall    time.Duration      // the whole `go test`, build and control plane included
	err     error
}

// runController runs `go test -bench BulkApply` on c.envtestPkg with the environment of this
// process (KUBEBUILDER_ASSETS names the control plane) and reads its figures.
func runController(ctx context.Context, c config) controllerResult {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return controllerResult{skipped: "KUBEBUILDER_ASSETS is not set: run `make bench`, or set it to the output of hack/envtest.sh"}
	}
	progress("controller: go test -run '^$' -bench '^BenchmarkBulkApply$' -benchtime 1x %s", c.envtestPkg)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^$", "-bench", "^BenchmarkBulkApply$",
		"-benchtime", "1x", "-timeout", "15m", c.envtestPkg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	res := controllerResult{ran: true, wall: time.Since(start)}
	res.metrics, res.detail = parseBenchOutput(out.String(), "BenchmarkBulkApply")
	switch {
	case err != nil:
		res.err = fmt.Errorf("BenchmarkBulkApply: %w\n%s", err, tail(out.String(), 40))
	case len(res.metrics) == 0:
		res.err = fmt.Errorf("BenchmarkBulkApply printed no figures\n%s", tail(out.String(), 40))
	}
	return res
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// parseBenchOutput reads `go test -bench` output: the metrics of name's result line
// ("value unit" pairs, ns/op included) and the first log line after it (b.Logf).
func parseBenchOutput(out, name string) (map[string]float64, string) {
	metrics := map[string]float64{}
	var detail string
	inBench := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := benchLine.FindStringSubmatch(line); m != nil && m[1] == name {
			f := strings.Fields(m[3])
			for i := 0; i+1 < len(f); i += 2 {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					metrics[f[i+1]] = v
				}
			}
			continue
		}
		if strings.HasPrefix(line, "--- BENCH: "+name) {
			inBench = true
			continue
		}
		if inBench && detail == "" && strings.HasPrefix(line, "    ") {
			_, rest, ok := strings.Cut(strings.TrimSpace(line), ": ")
			if ok {
				detail = rest
			}
		}
	}
	return metrics, detail
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
