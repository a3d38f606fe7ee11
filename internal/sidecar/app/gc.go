package app

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the sidecar's garbage-collection target (see SetGCPercent). Its live
// heap is small and bounded (a snapshot, the deny cache, connection buffers), and every
// decision allocates, mostly in gRPC, so with Go's default of 100 the collector runs many
// times a second. 400 lets the heap grow to five times the live data between collections:
// a little more memory for less CPU (docs/benchmarks.md has the measurement).
const DefaultGCPercent = 400

// SetGCPercent sets the garbage-collection target to percent (runtime/debug.SetGCPercent)
// unless the GOGC environment variable is set, which wins as for any Go program; a memory
// limit (GOMEMLIMIT) applies either way. It returns the previous setting.
func SetGCPercent(percent int) int {
	prev := debug.SetGCPercent(percent)
	if _, set := os.LookupEnv("GOGC"); set {
		debug.SetGCPercent(prev)
	}
	return prev
}
