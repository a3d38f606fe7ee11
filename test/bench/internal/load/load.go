// Package load is the closed-loop load generator of the bench commands: a number of callers
// each send one request at a time, back to back, for a fixed duration, and the figures are
// throughput, latency percentiles and what was decided. Measure adds CPU accounting (this
// process, redis-server, the rest of the machine).
package load

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Outcome is what one call decided.
type Outcome int

const (
	// Admitted by Redis.
	Admitted Outcome = iota
	// Denied by Redis (or by the deny cache, which repeats a Redis denial).
	Denied
	// Fallback is a decision made without Redis (a timeout, an open breaker): the failure
	// mode decided. A healthy run has none.
	Fallback
)

// Caller sends one request as caller g (0 <= g < callers); rng is g's own random source.
type Caller func(ctx context.Context, g int, rng *rand.Rand) (Outcome, error)

// Stats are the figures of one measurement.
type Stats struct {
	Calls     int
	PerSec    float64
	P50, P99  time.Duration
	Admitted  int
	Denied    int
	Fallbacks int
	// The CPU figures are set by Measure only.
	CPU       time.Duration // this process (generator and whatever it serves) per call
	RedisCPU  time.Duration // redis-server per call
	OtherLoad float64       // share of the machine's CPU other processes used meanwhile; <0 unknown
	Allocs    uint64        // bytes this process allocated per call
	// Batch is the mean number of checks per Redis pipeline, set by drivers that pipeline
	// (0: not known).
	Batch float64
}

// tally is one caller's figures.
type tally struct {
	lat                         []time.Duration
	admitted, denied, fallbacks int
}

// Drive runs callers goroutines calling fn back to back for d and returns the figures. The
// first error of any caller ends the measurement.
func Drive(ctx context.Context, callers int, d time.Duration, fn Caller) (Stats, error) {
	callers = max(callers, 1)
	tallies := make([]tally, callers)
	errs := make(chan error, callers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := range callers {
		wg.Go(func() {
			if err := callLoop(ctx, g, deadline, fn, &tallies[g]); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return Stats{}, err
	}
	return summarize(tallies, elapsed), nil
}

func callLoop(ctx context.Context, g int, deadline time.Time, fn Caller, t *tally) error {
	rng := rand.New(rand.NewPCG(uint64(g), 7))
	t.lat = make([]time.Duration, 0, 4096)
	for ctx.Err() == nil {
		t0 := time.Now()
		if !t0.Before(deadline) {
			return nil
		}
		out, err := fn(ctx, g, rng)
		if err != nil {
			return err
		}
		t.lat = append(t.lat, time.Since(t0))
		switch out {
		case Admitted:
			t.admitted++
		case Denied:
			t.denied++
		default:
			t.fallbacks++
		}
	}
	return nil
}

func summarize(tallies []tally, elapsed time.Duration) Stats {
	var s Stats
	var all []time.Duration
	for i := range tallies {
		t := &tallies[i]
		all = append(all, t.lat...)
		s.Admitted += t.admitted
		s.Denied += t.denied
		s.Fallbacks += t.fallbacks
	}
	if len(all) == 0 {
		return s
	}
	slices.Sort(all)
	s.Calls = len(all)
	s.PerSec = float64(len(all)) / elapsed.Seconds()
	s.P50, s.P99 = all[len(all)/2], all[len(all)*99/100]
	return s
}

// Measure is Drive plus CPU accounting: this process's CPU, redis-server's (redisCPU reads
// its cumulative CPU time, e.g. INFO cpu), and the share of the machine other processes used.
func Measure(ctx context.Context, callers int, d time.Duration, fn Caller, redisCPU func(context.Context) (time.Duration, error)) (Stats, error) {
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	proc0, machine0 := ProcessCPU(), MachineBusy()
	redis0, err := redisCPU(ctx)
	if err != nil {
		return Stats{}, err
	}
	start := time.Now()
	s, err := Drive(ctx, callers, d, fn)
	if err != nil || s.Calls == 0 {
		return s, err
	}
	elapsed := time.Since(start)
	redis1, err := redisCPU(ctx)
	if err != nil {
		return s, err
	}
	proc, red := ProcessCPU()-proc0, redis1-redis0
	runtime.ReadMemStats(&mem1)
	s.Allocs = (mem1.TotalAlloc - mem0.TotalAlloc) / uint64(s.Calls)
	s.CPU, s.RedisCPU = proc/time.Duration(s.Calls), red/time.Duration(s.Calls)
	s.OtherLoad = -1
	if machine1 := MachineBusy(); machine0 >= 0 && machine1 >= 0 {
		other := machine1 - machine0 - proc - red
		s.OtherLoad = max(0, float64(other)/float64(elapsed*time.Duration(runtime.NumCPU())))
	}
	return s, nil
}

// Median is the median of each figure of runs taken on its own (so the median p99 may come
// from another run than the median rate). Empty input gives zero Stats.
func Median(runs []Stats) Stats {
	if len(runs) == 0 {
		return Stats{}
	}
	return Stats{
		Calls:     MedianOf(runs, func(s Stats) int { return s.Calls }),
		PerSec:    MedianOf(runs, func(s Stats) float64 { return s.PerSec }),
		P50:       MedianOf(runs, func(s Stats) time.Duration { return s.P50 }),
		P99:       MedianOf(runs, func(s Stats) time.Duration { return s.P99 }),
		Admitted:  MedianOf(runs, func(s Stats) int { return s.Admitted }),
		Denied:    MedianOf(runs, func(s Stats) int { return s.Denied }),
		Fallbacks: slices.Max(each(runs, func(s Stats) int { return s.Fallbacks })), // any is news
		CPU:       MedianOf(runs, func(s Stats) time.Duration { return s.CPU }),
		RedisCPU:  MedianOf(runs, func(s Stats) time.Duration { return s.RedisCPU }),
		OtherLoad: MedianOf(runs, func(s Stats) float64 { return s.OtherLoad }),
		Allocs:    MedianOf(runs, func(s Stats) uint64 { return s.Allocs }),
		Batch:     MedianOf(runs, func(s Stats) float64 { return s.Batch }),
	}
}

// MedianOf is the median of f over xs: the middle value, or for an even count the lower of
// the two middle ones (a value that was measured, not an average). Zero for no xs.
func MedianOf[T any, N int | uint64 | float64 | time.Duration](xs []T, f func(T) N) N {
	v := each(xs, f)
	if len(v) == 0 {
		var zero N
		return zero
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

func each[T, N any](xs []T, f func(T) N) []N {
	out := make([]N, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// ProcessCPU is the user and system CPU time this process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MachineBusy is the CPU time all processes have used since boot (Linux /proc/stat), or -1.
func MachineBusy() time.Duration {
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
