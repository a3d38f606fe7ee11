package main

import (
	"strings"
	"testing"
)

// TestFormatMs: durations are "now", "never", to 0.1s under a minute and to 1s above.
func TestFormatMs(t *testing.T) {
	for ms, want := range map[int64]string{
		0: "now", -1: "never", 40: "40ms", 11873: "11.9s", 59873: "59.9s", 60000: "1m0s",
		61499: "1m1s", 86399000: "23h59m59s", 1 << 62: "2562047h47m16s",
	} {
		if got := formatMs(ms); got != want {
			t.Errorf("formatMs(%d) = %q, want %q", ms, got, want)
		}
	}
}

// TestIdentityLabel: an identity is shown as given, parts joined with "/", anything a table
// cannot show quoted, and long values cut to 40 characters ending in "…".
func TestIdentityLabel(t *testing.T) {
	long := strings.Repeat("é", 50)
	for _, tc := range []struct {
		identity    string
		hasIdentity bool
		parts       []string
		want        string
	}{
		{"alice", true, nil, "alice"},
		{"a b/c?d&e", true, nil, "a b/c?d&e"},
		{"", true, nil, `""`},
		{"tab\there", true, nil, `"tab\there"`},
		{"\xff", true, nil, `"\xff"`},
		{long, true, nil, strings.Repeat("é", 39) + "…"},
		{"", false, []string{"acme", "POST"}, "acme/POST"},
		{"", false, nil, "-"},
	} {
		if got := identityLabel(tc.identity, tc.hasIdentity, tc.parts); got != tc.want {
			t.Errorf("identityLabel(%q, %v, %q) = %q, want %q", tc.identity, tc.hasIdentity, tc.parts, got, tc.want)
		}
	}
}

// TestDecision: denials say how long to wait (or that a request of the cost never passes),
// admissions what is left; other results stand alone.
func TestDecision(t *testing.T) {
	for _, tc := range []struct {
		answer usageAnswer
		want   string
	}{
		{usageAnswer{Result: "denied", Limit: "per-minute", RetryAfterMs: 11873}, "denied (per-minute: retry in 11.9s)"},
		{usageAnswer{Result: "denied", Limit: "burst", RetryAfterMs: -1}, "denied (burst: never at this cost)"},
		{usageAnswer{Result: "shadow_denied", Allowed: true, Limit: "per-minute", RetryAfterMs: 500},
			"shadow_denied (per-minute: retry in 500ms)"},
		{usageAnswer{Result: "allowed", Allowed: true, Limit: "per-minute", Quota: 5, Remaining: 3},
			"allowed (per-minute: 3 of 5 left)"},
		{usageAnswer{Result: "skipped", Allowed: true, Limit: "per-minute"}, "skipped"},
		{usageAnswer{Allowed: false}, "denied"},
	} {
		if got := decision(&tc.answer); got != tc.want {
			t.Errorf("decision(%+v) = %q, want %q", tc.answer, got, tc.want)
		}
	}
}
