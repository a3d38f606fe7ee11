package httppath

import (
	"bytes"
	"fmt"
)

const upperHex = "0123456789ABCDEF"

// Normalize returns the normalized form of escaped, the escaped path of a request target as
// received (without query), or an error wrapping the reason it is refused. The package
// documentation describes both.
func Normalize(escaped string) (string, error) {
	if escaped == "" || escaped[0] != '/' {
		return "", fmt.Errorf("byte 0: %w", ErrNotOriginForm)
	}
	n := normalizer{out: make([]byte, 1, len(escaped)+8), seg: 1}
	n.out[0] = '/'
	for i := 1; i < len(escaped); {
		var err error
		at := i
		switch c := escaped[i]; c {
		case '/':
			n.endSegment(false)
			i++
		case '%':
			err = n.writeEscape(escaped, i)
			i += 3
		default:
			err = n.writeRaw(c)
			i++
		}
		if err != nil {
			return "", fmt.Errorf("byte %d: %w", at, err)
		}
	}
	n.endSegment(true)
	return string(n.out), nil
}

// normalizer builds a normalized path: out always holds a normalized path whose last
// segment, from seg on, is still being written.
type normalizer struct {
	out []byte
	seg int
}

// writeEscape writes the escape at s[i:i+3]: decoded when unreserved, else with upper-case hex.
func (n *normalizer) writeEscape(s string, i int) error {
	if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
		return ErrBadEscape
	}
	b := unhex(s[i+1])<<4 | unhex(s[i+2])
	if b == '/' {
		return ErrEncodedSlash
	}
	return n.write(b, isUnreserved(b))
}

// writeRaw writes a byte that arrived unencoded: as is when a path may hold it raw, else
// percent-encoded.
func (n *normalizer) writeRaw(c byte) error {
	if c == '?' || c == '#' {
		return ErrQueryOrFragment
	}
	return n.write(c, isPathChar(c))
}

// write writes c, raw or decoded from an escape: as is when plain, else percent-encoded with
// upper-case hex. A backslash or a control byte is refused however it arrived.
func (n *normalizer) write(c byte, plain bool) error {
	switch {
	case c == '\\':
		return ErrBackslash
	case isControl(c):
		return ErrControl
	case plain:
		n.out = append(n.out, c)
	default:
		n.out = append(n.out, '%', upperHex[c>>4], upperHex[c&15])
	}
	return nil
}

// endSegment finishes the segment being written, at a "/" or (final) at the end: an empty
// segment merges into the slash before it, "." is dropped, ".." drops itself and the
// segment before it (never the root), and any other segment is kept.
func (n *normalizer) endSegment(final bool) {
	switch string(n.out[n.seg:]) {
	case "":
	case ".":
		n.out = n.out[:n.seg]
	case "..":
		n.out = n.out[:n.seg]
		if n.seg > 1 {
			n.seg = bytes.LastIndexByte(n.out[:n.seg-1], '/') + 1
			n.out = n.out[:n.seg]
		}
	default:
		if !final {
			n.out = append(n.out, '/')
			n.seg = len(n.out)
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// isUnreserved reports RFC 3986 unreserved characters: ALPHA / DIGIT / "-" / "." / "_" / "~".
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// isPathChar reports the bytes a path segment may hold raw (RFC 3986 pchar, without "%"):
// unreserved, sub-delims and ":" / "@".
func isPathChar(c byte) bool {
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
		return true
	}
	return isUnreserved(c)
}
