package eventnote

import "testing"

// TestOneLine: a note keeps printable text as it is, and every character that could start a
// line or hide one is escaped, so the note prints as one line.
func TestOneLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`grant by "alice" for caller 2bd806c97f0e00af: per-minute +3 (now 3 of 5)`, `grant by "alice" for caller 2bd806c97f0e00af: per-minute +3 (now 3 of 5)`},
		{"ünïcödé, 日本, emoji 🙂", "ünïcödé, 日本, emoji 🙂"},
		{"a\ngrant by system:admin", `a\ngrant by system:admin`},
		{"a\r\nb\tc\x00d\x1be\x7f", `a\r\nb\tc\x00d\x1be\x7f`},
		{"a\u2028b\u2029c\u0085d", `a\u2028b\u2029c\u0085d`},
		{"bad \xff byte", `bad \xff byte`},
		{"", ""},
	} {
		if got := OneLine(c.in); got != c.want {
			t.Errorf("OneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
