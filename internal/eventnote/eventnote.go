// Package eventnote keeps a Kubernetes Event's note to one line. A note is free text that
// `kubectl get events` and `kubectl describe` print as it is: a newline in a value the
// note carries (a request id, a user name, a policy's text quoted in an error) would print a
// line of its own, which can pass for another Event. Structured log values need none of this:
// the log encoder escapes them.
package eventnote

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OneLine is s with every character that is not printable (newlines, carriage returns, tabs,
// other control characters, Unicode line and paragraph separators, bytes that are not UTF-8)
// written as its Go escape (\n, \t, \u2028, \xff); s itself when it has none.
func OneLine(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			q := strconv.Quote(s[:1]) // "\xff"
			b.WriteString(q[1 : len(q)-1])
		case unprintable(r):
			q := strconv.QuoteRune(r) // '\n'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// unprintable reports whether r must be escaped: anything but letters, marks, numbers,
// punctuation, symbols and the ASCII space.
func unprintable(r rune) bool { return !unicode.IsPrint(r) }
