package keylayout

import (
	"strings"
	"testing"
	"unsafe"
)

// hostileValues are identity values chosen to break key structure or the length bound.
var hostileValues = []string{
	"", "{", "}", "{}", "}{", "{user1000}", "a}{b", "{{x}}", "\r\n", "a\r\nb", "\x00", "a\x00b",
	"%", "%25", "%2", "#", "#abc", ":", "a:b", "rl:ns/p:id", " ", "\t", "\x7f", "\xff", "\xc3",
	"日本語", "émoji 🚦", "$", "${identity}", "%7B", "%7D", "%3A",
	strings.Repeat("a", MaxEncodedLen), strings.Repeat("a", MaxEncodedLen+1),
	strings.Repeat("{", 42), strings.Repeat("{", 43), strings.Repeat("{", 100),
	"a" + strings.Repeat("}", 42) + "b", strings.Repeat("x", 10<<10), strings.Repeat("{}", 5<<10),
	strings.Repeat("\x00", 64<<10), strings.Repeat("y", 64<<10), strings.Repeat("y", 64<<10) + "z",
}

func TestEncodeValueHostile(t *testing.T) {
	seen := map[string]string{}
	for _, raw := range hostileValues {
		enc := EncodeValue(raw)
		if err := checkEncoded(raw, enc); err != nil {
			t.Error(err)
		}
		if prev, dup := seen[enc]; dup {
			t.Errorf("EncodeValue(%.40q) == EncodeValue(%.40q) == %q", raw, prev, enc)
		}
		seen[enc] = raw
	}
}

func TestEncodeValueForms(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"", ""},
		{"alice", "alice"},
		{"A-Za-z0-9._@/+=", "A-Za-z0-9._@/+="},
		{"user@example.com", "user@example.com"},
		{"{a}", "%7Ba%7D"},
		{"a:b", "a%3Ab"},
		{"50%", "50%25"},
		{"#1", "%231"},
		{"\r\n\x00", "%0D%0A%00"},
		{"é", "%C3%A9"},
		{"a b", "a%20b"},
		{strings.Repeat("{", 42) + "aa", strings.Repeat("%7B", 42) + "aa"}, // exactly 128 bytes
	}
	for _, tc := range tests {
		if got := EncodeValue(tc.raw); got != tc.want {
			t.Errorf("EncodeValue(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
	// One byte over the bound switches to the hashed form.
	for _, raw := range []string{strings.Repeat("{", 42) + "aaa", strings.Repeat("x", MaxEncodedLen+1)} {
		got := EncodeValue(raw)
		if len(got) != HashedLen || got[0] != '#' {
			t.Errorf("EncodeValue(%.40q...) = %q, want the %d-byte hashed form", raw, got, HashedLen)
		}
		if err := checkEncoded(raw, got); err != nil {
			t.Error(err)
		}
	}
}

func TestEncodeValueFastPath(t *testing.T) {
	for _, raw := range []string{"alice", "tenant-a/user_1@example.com", strings.Repeat("z", MaxEncodedLen)} {
		var got string
		allocs := testing.AllocsPerRun(100, func() { got = EncodeValue(raw) })
		if got != raw {
			t.Errorf("EncodeValue(%q) = %q, want it unchanged", raw, got)
		}
		if allocs != 0 {
			t.Errorf("EncodeValue(%q) allocates %v times, want 0", raw, allocs)
		}
		if len(raw) > 0 && unsafe.StringData(got) != unsafe.StringData(raw) {
			t.Errorf("EncodeValue(%q) returned a copy, want the input string itself", raw)
		}
	}
	// The escaped form allocates only its result; the hashed form also copies the input
	// for SHA-256.
	for raw, want := range map[string]float64{"{a}": 1, strings.Repeat("x", 4096): 2} {
		if allocs := testing.AllocsPerRun(100, func() { _ = EncodeValue(raw) }); allocs > want {
			t.Errorf("EncodeValue(%.20q...) allocates %v times, want at most %v", raw, allocs, want)
		}
	}
}

// TestEncodeValueAllBytes checks every single byte and every pair of bytes: all outputs are
// well formed and pairwise distinct.
func TestEncodeValueAllBytes(t *testing.T) {
	seen := make(map[string]bool, 1<<16+1<<8)
	for a := range 256 {
		for _, raw := range append([]string{string([]byte{byte(a)})}, pairs(byte(a))...) {
			enc := EncodeValue(raw)
			if err := checkEncoded(raw, enc); err != nil {
				t.Fatal(err)
			}
			if seen[enc] {
				t.Fatalf("EncodeValue(%q) = %q repeats an earlier output", raw, enc)
			}
			seen[enc] = true
		}
	}
}

// pairs returns the 256 two-byte strings starting with a.
func pairs(a byte) []string {
	out := make([]string, 256)
	for b := range 256 {
		out[b] = string([]byte{a, byte(b)})
	}
	return out
}
