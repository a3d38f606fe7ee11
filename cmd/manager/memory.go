package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// memoryOptions are the flags of the Redis memory checks.
type memoryOptions struct {
	interval   time.Duration
	scanPerSec int64
}

func (m *memoryOptions) bind(fs *flag.FlagSet) {
	fs.DurationVar(&m.interval, "redis-memory-check-interval", redismemory.DefaultCheckInterval,
		"How often every Redis node's maxmemory, maxmemory-policy and maxmemory-clients are read (policies' CountersProtected condition, ratelimit_redis_* metrics); 0 turns the checks off.")
	fs.Int64Var(&m.scanPerSec, "redis-memory-scan-keys-per-second", redismemory.DefaultScanCount,
		"Keys per second and primary the per-namespace memory sampling sizes (SCAN COUNT of one step a second, then MEMORY USAGE and PTTL of each key); 0 turns the sampling off.")
}

// validate reports the first bad flag, by name.
func (m *memoryOptions) validate() error {
	switch {
	case m.interval < 0:
		return fmt.Errorf("--redis-memory-check-interval: %s is negative", m.interval)
	case m.scanPerSec < 0:
		return fmt.Errorf("--redis-memory-scan-keys-per-second: %d is negative", m.scanPerSec)
	}
	return nil
}

// monitor is the Redis memory monitor over nodes; nil when the checks are off. With tenant
// users (their names beginning with tenantPrefix) it also reports their connections.
func (m *memoryOptions) monitor(nodes redisacl.Nodes, tenantPrefix string) *redismemory.Monitor {
	if m.interval == 0 {
		return nil
	}
	return &redismemory.Monitor{Nodes: nodes, TenantUserPrefix: tenantPrefix, CheckInterval: m.interval,
		ScanInterval: time.Second, ScanCount: m.scanPerSec}
}
