package redismemory

import (
	"strconv"
	"strings"
)

// Finding is one way Redis's memory settings or contents expose the limiter's counters.
type Finding string

// Findings, worst first: a policy's condition names the first that applies.
const (
	// CountersEvictable: a node's maxmemory-policy is not noeviction, so a full Redis evicts
	// counters (every limiter key has a TTL, so volatile-* policies evict them too) and the
	// identities they limited are admitted again.
	CountersEvictable Finding = "CountersEvictable"
	// MemoryUnbounded: a node's maxmemory is 0; Redis grows until the kernel kills it.
	MemoryUnbounded Finding = "MemoryUnbounded"
	// ClientMemoryUnbounded: a node's maxmemory-clients is 0 (or Redis is older than 7.0):
	// a client's buffers are never evicted, however large.
	ClientMemoryUnbounded Finding = "ClientMemoryUnbounded"
	// RepliesUnbounded: a node's client-output-buffer-limit normal has no hard limit: one
	// short command (an MGET naming a large key many times) builds a reply of any size,
	// holding Redis's single thread, and every tenant, while it does.
	RepliesUnbounded Finding = "RepliesUnbounded"
	// ValuesUnbounded: a node's proto-max-bulk-len is above MaxBulkLen: a namespace's user
	// may store values that large under its own keys, which each call of the limiter's
	// functions on them copies into Lua (the limiter's own values are under 256 bytes).
	ValuesUnbounded Finding = "ValuesUnbounded"
	// ForeignKeys: keys without a TTL in a namespace's scope, which the limiter never
	// writes: someone holding the namespace's Redis credentials wrote them.
	ForeignKeys Finding = "ForeignKeys"
)

// NodeFindings are the findings of a node's settings, worst first.
var NodeFindings = []Finding{CountersEvictable, MemoryUnbounded, ClientMemoryUnbounded, RepliesUnbounded, ValuesUnbounded}

// MaxBulkLen is the largest proto-max-bulk-len that is not ValuesUnbounded: 1 MiB, the least
// Redis accepts.
const MaxBulkLen = 1 << 20

// NoEviction is the only maxmemory-policy that keeps every counter.
const NoEviction = "noeviction"

// minClientEviction is the least maxmemory-clients Redis applies (getClientEvictionLimit):
// smaller settings are raised to it.
const minClientEviction = 128 << 10

// Settings are one node's memory settings and use.
type Settings struct {
	// MaxMemory is maxmemory in bytes; 0 is unbounded.
	MaxMemory int64
	// Policy is maxmemory-policy.
	Policy string
	// MaxMemoryClients is maxmemory-clients as CONFIG GET shows it ("0", "10%", bytes);
	// empty when the node has no such setting (Redis older than 7.0).
	MaxMemoryClients string
	// UsedMemory is INFO's used_memory.
	UsedMemory int64
	// ClientMemory is INFO's mem_clients_normal: the buffers of normal clients.
	ClientMemory int64
	// ReplyLimit is the hard limit of client-output-buffer-limit's normal class in bytes;
	// 0 is none.
	ReplyLimit int64
	// MaxBulk is proto-max-bulk-len: the largest value a command may carry, in bytes.
	MaxBulk int64
	// EvictedKeys is INFO's evicted_keys since the node started.
	EvictedKeys int64
	// Primary is true for a primary (INFO role:master).
	Primary bool
}

// ClientLimit is the client memory at which Redis starts evicting clients, in bytes, as
// Redis computes it: a percentage applies to maxmemory (none without it), and a positive
// limit is at least 128 KiB. 0 means clients are never evicted.
func (s Settings) ClientLimit() int64 {
	v := strings.TrimSpace(s.MaxMemoryClients)
	var limit int64
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		p, err := strconv.ParseInt(pct, 10, 64)
		if err != nil || p <= 0 || s.MaxMemory <= 0 {
			return 0
		}
		limit = int64(float64(s.MaxMemory) * float64(p) / 100)
	} else if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		limit = n
	}
	if limit <= 0 {
		return 0
	}
	return max(limit, minClientEviction)
}

// Findings are what s exposes, worst first.
func (s Settings) Findings() []Finding {
	var out []Finding
	if s.Policy != NoEviction {
		out = append(out, CountersEvictable)
	}
	if s.MaxMemory <= 0 {
		out = append(out, MemoryUnbounded)
	}
	if s.ClientLimit() == 0 {
		out = append(out, ClientMemoryUnbounded)
	}
	if s.ReplyLimit <= 0 {
		out = append(out, RepliesUnbounded)
	}
	if s.MaxBulk > MaxBulkLen {
		out = append(out, ValuesUnbounded)
	}
	return out
}

// normalReplyLimit is the hard limit of the normal class in a client-output-buffer-limit
// setting ("normal 0 0 0 replica 268435456 67108864 60 pubsub ..."), in bytes; 0 when none
// or unreadable.
func normalReplyLimit(setting string) int64 {
	f := strings.Fields(setting)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "normal" {
			n, _ := strconv.ParseInt(f[i+1], 10, 64)
			return n
		}
	}
	return 0
}
