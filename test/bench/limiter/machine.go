package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// machine describes where the figures were taken.
type machine struct {
	date          time.Time
	cpus          int
	cpuModel      string
	goVersion     string
	redisVersion  string // INFO server of the server measured
	benchmarkTool string // redis-benchmark --version
	loadAtStart   string
}

func readMachine() machine {
	m := machine{date: time.Now().UTC(), cpus: runtime.NumCPU(), cpuModel: cpuModel(),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, loadAtStart: loadAverage()}
	if out, err := exec.Command("redis-benchmark", "--version").Output(); err == nil {
		m.benchmarkTool = strings.TrimSpace(string(out))
	}
	return m
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage is the 1, 5 and 15 minute load average from /proc/loadavg, or "".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
