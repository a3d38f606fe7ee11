package redismemory_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestSettings: each configuration of a real redis-server is reported with the findings it
// has, and a policy's assessment names the worst: only noeviction with maxmemory and
// maxmemory-clients keeps the counters.
func TestSettings(t *testing.T) {
	t.Parallel()
	E, M, C := redismemory.CountersEvictable, redismemory.MemoryUnbounded, redismemory.ClientMemoryUnbounded
	R, V := redismemory.RepliesUnbounded, redismemory.ValuesUnbounded
	bounded := []string{"--client-output-buffer-limit", "normal 32mb 8mb 60", "--proto-max-bulk-len", "1mb"}
	for _, tc := range []struct {
		name   string
		args   []string
		want   []redismemory.Finding
		reason string
		says   string // in the message
	}{
		{"default", nil, []redismemory.Finding{M, C, R, V}, string(M), "maxmemory 0 on "},
		{"allkeys-lru", []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}, []redismemory.Finding{E, C, R, V},
			string(E), "maxmemory-policy allkeys-lru on "},
		{"volatile-lru", append([]string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru", "--maxmemory-clients", "8mb"}, bounded...),
			[]redismemory.Finding{E}, string(E), "maxmemory-policy volatile-lru on "},
		{"volatile-ttl", append([]string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl", "--maxmemory-clients", "8mb"}, bounded...),
			[]redismemory.Finding{E}, string(E), "maxmemory-policy volatile-ttl on "},
		{"noeviction", append([]string{"--maxmemory", "64mb", "--maxmemory-policy", "noeviction"}, bounded...), []redismemory.Finding{C},
			string(C), "maxmemory-clients 0 on "},
		{"client percent without maxmemory", append([]string{"--maxmemory-clients", "10%"}, bounded...), []redismemory.Finding{M, C},
			string(M), "maxmemory-clients 10% of maxmemory 0 on "},
		{"replies unbounded", []string{"--maxmemory", "64mb", "--maxmemory-clients", "10%", "--proto-max-bulk-len", "1mb"},
			[]redismemory.Finding{R}, string(R), "client-output-buffer-limit normal 0 on "},
		{"values unbounded", []string{"--maxmemory", "64mb", "--maxmemory-clients", "10%", "--client-output-buffer-limit", "normal 32mb 8mb 60"},
			[]redismemory.Finding{V}, string(V), "proto-max-bulk-len 536870912 on "},
		{"protected", redistest.LimiterMemory("64mb", "10%"),
			nil, redismemory.ReasonProtected, "every Redis node (1) bounds memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, m := standalone(t, tc.args...)
			r := check(testCtx(t), t, m)
			if len(r.Nodes) != 1 || r.Nodes[0].Err != nil || r.Nodes[0].Addr != srv.Addr() || !r.Nodes[0].Primary {
				t.Fatalf("nodes %+v; want %s checked, a primary", r.Nodes, srv.Addr())
			}
			if got := findings(r); !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v", got, tc.want)
			}
			a := m.Assess("shop")
			wantState := redismemory.Exposed
			if tc.want == nil {
				wantState = redismemory.Protected
			}
			if a.State != wantState || a.Reason != tc.reason || !strings.Contains(a.Message, tc.says) {
				t.Errorf("assessment %+v; want state %v, reason %s, a message saying %q", a, wantState, tc.reason, tc.says)
			}
		})
	}
}

// TestClientLimit: maxmemory-clients as Redis applies it (getClientEvictionLimit).
func TestClientLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxMemory int64
		setting   string
		want      int64
	}{
		{0, "0", 0}, {0, "", 0}, {1 << 30, "0", 0},
		{0, "10%", 0},               // a share of no maxmemory is none
		{1 << 30, "10%", 107374182}, // 10% of 1 GiB
		{0, "1048576", 1048576},     // bytes, with or without maxmemory
		{0, "1024", 128 << 10},      // raised to 128 KiB
		{1 << 20, "1%", 128 << 10},  // likewise
		{1 << 30, "garbage", 0},     // unreadable: none
		{1 << 30, "-5%", 0},         // negative share: none
	} {
		s := redismemory.Settings{MaxMemory: tc.maxMemory, MaxMemoryClients: tc.setting}
		if got := s.ClientLimit(); got != tc.want {
			t.Errorf("maxmemory %d, maxmemory-clients %q: limit %d, want %d", tc.maxMemory, tc.setting, got, tc.want)
		}
	}
}

// TestNotCheckedIsUnknown: before a round, and without a report, nothing is claimed.
func TestNotCheckedIsUnknown(t *testing.T) {
	t.Parallel()
	var m redismemory.Monitor
	if a := m.Assess("shop"); a.State != redismemory.Unknown || a.Reason != redismemory.ReasonNotChecked {
		t.Errorf("assessment before a round %+v; want Unknown/%s", a, redismemory.ReasonNotChecked)
	}
}
