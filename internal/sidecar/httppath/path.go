package httppath

import (
	"fmt"
	"strings"
)

// Asterisk is the asterisk-form request target of "OPTIONS *" (RFC 9112 section 3.2.4).
const Asterisk = "*"

// Path is a request path ready for matching. The zero Path matches no prefix.
type Path struct {
	escaped string // Normalize's output, or Asterisk
	key     string // what prefixes are compared with (matchKey); "" for Asterisk
}

// Parse normalizes escaped, the escaped path of a request target as received.
func Parse(escaped string) (Path, error) {
	n, err := Normalize(escaped)
	if err != nil {
		return Path{}, err
	}
	return Path{escaped: n, key: matchKey(n)}, nil
}

// ParseTarget is Parse for the path of a request with method: it also accepts the
// asterisk-form "*" of OPTIONS, a Path that matches no prefix.
func ParseTarget(method, escaped string) (Path, error) {
	if escaped != Asterisk {
		return Parse(escaped)
	}
	if !strings.EqualFold(method, "OPTIONS") {
		return Path{}, fmt.Errorf("byte 0: %w", ErrAsterisk)
	}
	return Path{escaped: Asterisk}, nil
}

// String is the normalized escaped path: what a front forwards.
func (p Path) String() string { return p.escaped }

// TargetPath is the escaped path of an HTTP request target as received, for Parse: the
// part before the query of an origin-form target ("/a/b?q" gives "/a/b"), the path of an
// absolute-form one ("http://h/a?q" gives "/a", "http://h" gives "/"), and "*" for the
// asterisk-form. Anything else is returned without its query, for Parse to refuse.
func TargetPath(target string) string {
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if target == "" || target[0] == '/' || target == Asterisk {
		return target
	}
	if i := strings.Index(target, "://"); i > 0 && isScheme(target[:i]) {
		authorityAndPath := target[i+3:]
		if j := strings.IndexByte(authorityAndPath, '/'); j >= 0 {
			return authorityAndPath[j:]
		}
		return "/"
	}
	return target
}

// isScheme reports an RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		later := i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')
		if !letter && !later {
			return false
		}
	}
	return s != ""
}

// matchKey is what prefixes are compared with: n (a normalized path) with each segment's
// parameters removed, normalized again (removing them can uncover dot segments and empty
// segments: "/x/..;/a" is "/a"), in lower case.
func matchKey(n string) string {
	s := stripParams(n)
	if s != n {
		if again, err := Normalize(s); err == nil { // always: s is made of n's valid parts
			s = again
		}
	}
	return lowerASCII(s)
}

// stripParams removes, from each segment of a normalized path, everything from its first ";"
// or "%3B" on.
func stripParams(n string) string {
	var b []byte // nil until something is removed
	skipping := false
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '/':
			skipping = false
		case !skipping && (c == ';' || c == '%' && strings.HasPrefix(n[i:], "%3B")):
			skipping = true
			if b == nil {
				b = append(make([]byte, 0, len(n)), n[:i]...)
			}
		}
		if b != nil && !skipping {
			b = append(b, c)
		}
	}
	if b == nil {
		return n
	}
	return string(b)
}

// lowerASCII lower-cases ASCII letters only (a normalized path holds no other bytes).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
