// Package benchredis is the Redis side of the bench commands: INFO readings, the
// redis-benchmark ceiling and bytes per identity (the processes come from
// redistest.Procs).
package benchredis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct {
	Calls int64
	Usec  int64 // total µs Redis spent executing the command (for scripts: the script's run)
}

// UsecPerCall is Usec / Calls, 0 without calls.
func (s CommandStat) UsecPerCall() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Usec) / float64(s.Calls)
}

// Add sums two readings (of two primaries).
func (s CommandStat) Add(o CommandStat) CommandStat {
	return CommandStat{Calls: s.Calls + o.Calls, Usec: s.Usec + o.Usec}
}

// Commandstat reads cmd's line ("evalsha") of INFO commandstats on one server; zero before
// its first call.
func Commandstat(ctx context.Context, c redis.Cmdable, cmd string) (CommandStat, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return CommandStat{}, fmt.Errorf("info commandstats: %w", err)
	}
	return parseCommandstat(info, cmd)
}

func parseCommandstat(info, cmd string) (CommandStat, error) {
	rest, ok := InfoField(info, "cmdstat_"+strings.ToLower(cmd)+":")
	if !ok {
		return CommandStat{}, nil
	}
	var s CommandStat
	for kv := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var dst *int64
		switch k {
		case "calls":
			dst = &s.Calls
		case "usec":
			dst = &s.Usec
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("cmdstat_%s %s=%q: %w", cmd, k, v, err)
		}
		*dst = n
	}
	return s, nil
}

// CPU is the CPU time one redis-server has used (INFO cpu, user + system).
func CPU(ctx context.Context, c redis.Cmdable) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("info cpu: %w", err)
	}
	var total float64
	for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
		v, ok := InfoField(info, field)
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

// InfoField is the rest of the INFO line starting with prefix.
func InfoField(info, prefix string) (string, bool) {
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return rest, true
		}
	}
	return "", false
}

// Version is redis_version from INFO server.
func Version(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("info server: %w", err)
	}
	v, ok := InfoField(info, "redis_version:")
	if !ok {
		return "", fmt.Errorf("no redis_version in INFO server")
	}
	return v, nil
}

// Ceiling is one redis-benchmark run.
type Ceiling struct {
	PerSec   float64       // calls/s redis-benchmark reached
	UsecCall float64       // Redis's own µs per EVALSHA (or FCALL) meanwhile (INFO commandstats)
	CPUCall  time.Duration // redis-server CPU per call meanwhile (INFO cpu)
}

// BenchmarkSpec is an EVALSHA redis-benchmark run, or with Function an FCALL run: Keys and
// Args may hold __rand_int__, which redis-benchmark replaces with a random number below
// Identities.
type BenchmarkSpec struct {
	Source string // the script, loaded first with SCRIPT LOAD (EVALSHA runs)
	// Function, when set, makes it an FCALL run of this function, and Library the function
	// library loaded first with FUNCTION LOAD REPLACE (Source is then unused).
	Function, Library string
	Keys, Args        []string
	Calls             int
	Identities        int
	Clients           int // default 50
	Pipeline          int // default 16
}

// Benchmark flushes the server at port, loads the script (or function library), resets its
// statistics and runs redis-benchmark -P 16 with EVALSHA (or FCALL), returning what it
// reached and what Redis spent.
func Benchmark(ctx context.Context, rdb *redis.Client, port int, b BenchmarkSpec) (Ceiling, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return Ceiling{}, fmt.Errorf("flushall: %w", err)
	}
	cmd, target, err := b.load(ctx, rdb)
	if err != nil {
		return Ceiling{}, err
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return Ceiling{}, fmt.Errorf("config resetstat: %w", err)
	}
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(port),
		"-c", strconv.Itoa(orDefault(b.Clients, 50)), "-P", strconv.Itoa(orDefault(b.Pipeline, 16)),
		"-n", strconv.Itoa(b.Calls), "-r", strconv.Itoa(max(b.Identities, 1)), "--csv",
		cmd, target, strconv.Itoa(len(b.Keys))}
	args = append(append(args, b.Keys...), b.Args...)
	cpu0, err := CPU(ctx, rdb)
	if err != nil {
		return Ceiling{}, err
	}
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).Output()
	if err != nil {
		return Ceiling{}, fmt.Errorf("redis-benchmark: %w", err)
	}
	cpu1, err := CPU(ctx, rdb)
	if err != nil {
		return Ceiling{}, err
	}
	var c Ceiling
	if c.PerSec, err = ParseBenchmarkCSV(out); err != nil {
		return c, err
	}
	st, err := Commandstat(ctx, rdb, cmd)
	if err != nil {
		return c, err
	}
	if st.Calls == 0 {
		return c, fmt.Errorf("redis-benchmark ran no %s: %q", cmd, out)
	}
	c.UsecCall, c.CPUCall = st.UsecPerCall(), (cpu1-cpu0)/time.Duration(st.Calls)
	return c, nil
}

// load loads what b runs and returns the command and its first argument: FCALL and the
// function after FUNCTION LOAD REPLACE of the library, or EVALSHA and the SHA after SCRIPT
// LOAD.
func (b BenchmarkSpec) load(ctx context.Context, rdb *redis.Client) (cmd, target string, err error) {
	if b.Function != "" {
		if err := rdb.FunctionLoadReplace(ctx, b.Library).Err(); err != nil {
			return "", "", fmt.Errorf("function load %s: %w", b.Function, err)
		}
		return "FCALL", b.Function, nil
	}
	sha, err := rdb.ScriptLoad(ctx, b.Source).Result()
	if err != nil {
		return "", "", fmt.Errorf("script load: %w", err)
	}
	return "EVALSHA", sha, nil
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// ParseBenchmarkCSV reads the rps column of redis-benchmark --csv output.
func ParseBenchmarkCSV(out []byte) (float64, error) {
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

// BytesPerIdentity runs check for each of n identities on an emptied server and returns the
// summed MEMORY USAGE of every key divided by n.
func BytesPerIdentity(ctx context.Context, rdb *redis.Client, n int, check func(int) error) (float64, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, fmt.Errorf("flushall: %w", err)
	}
	for i := range n {
		if err := check(i); err != nil {
			return 0, err
		}
	}
	var total int64
	var keys []string
	flush := func() error {
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.MemoryUsage(ctx, k, 0)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("memory usage: %w", err)
		}
		for _, c := range cmds {
			total += c.(*redis.IntCmd).Val()
		}
		keys = keys[:0]
		return nil
	}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 1000 {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return 0, fmt.Errorf("scan: %w", err)
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return float64(total) / float64(max(n, 1)), nil
}
