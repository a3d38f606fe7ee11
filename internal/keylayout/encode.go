package keylayout

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

const (
	// MaxEncodedLen is the maximum length of EncodeValue's output, in bytes.
	MaxEncodedLen = 128
	// hashedPrefix starts the hashed form; it never occurs in the percent-encoded form.
	hashedPrefix = '#'
	// hashedBytes is how many leading bytes of the SHA-256 digest the hashed form keeps.
	hashedBytes = 30
	// HashedLen is the length of EncodeValue's hashed form: '#' and 60 hex digits.
	HashedLen = 1 + 2*hashedBytes
)

const upperHex = "0123456789ABCDEF"

// passThrough lists the bytes that EncodeValue passes through unchanged. Notably absent:
// ':', '{', '}', '%', '#', whitespace, control bytes and non-ASCII bytes.
const passThrough = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@/+=-"

// escapeCost is how many bytes encoding a byte adds: 0 for pass-through bytes, 2 for bytes
// written as %XX. A table of counts keeps encodedLen's loop free of branches.
var escapeCost = func() (t [256]uint8) {
	for i := range t {
		t[i] = 2
	}
	for i := 0; i < len(passThrough); i++ {
		t[passThrough[i]] = 0
	}
	return t
}()

// EncodeValue encodes a variable value, possibly untrusted, as key text. Expand applies it to
// every value.
//
// Bytes in [A-Za-z0-9._@/+=-] pass through; every other byte becomes %XX (uppercase hex).
// If that form would be longer than MaxEncodedLen bytes, the output is instead '#' followed
// by the lowercase hex of the first 30 bytes of SHA-256(raw), HashedLen bytes in all.
//
// The output is therefore at most MaxEncodedLen bytes of printable ASCII and never contains
// '{', '}', ':', whitespace, control bytes or non-ASCII bytes; '%' occurs only as an escape.
// The encoding is injective: the percent-encoded form decodes uniquely, and since '#' never
// occurs in it, hashed and percent-encoded outputs cannot collide. Two distinct long values
// collide only if their SHA-256 digests agree in the first 240 bits, which is negligible.
//
// A value of at most MaxEncodedLen pass-through bytes is returned as is, without allocating;
// the percent-encoded form allocates only the result, the hashed form also a copy of raw.
func EncodeValue(raw string) string {
	n, f := encodedLen(raw)
	if f == formPlain {
		return raw
	}
	var b strings.Builder
	b.Grow(n)
	writeEncoded(&b, raw, f)
	return b.String()
}

// form is which of EncodeValue's three output forms a value takes.
type form uint8

const (
	formPlain   form = iota // the value itself
	formEscaped             // percent-encoded
	formHashed              // '#' and a SHA-256 prefix
	formUnknown             // not computed yet
)

// encodedLen returns the length and form of EncodeValue(raw).
func encodedLen(raw string) (int, form) {
	if len(raw) > MaxEncodedLen {
		return HashedLen, formHashed
	}
	n := len(raw)
	for i := 0; i < len(raw); i++ {
		n += int(escapeCost[raw[i]])
	}
	switch {
	case n > MaxEncodedLen:
		return HashedLen, formHashed
	case n == len(raw):
		return n, formPlain
	default:
		return n, formEscaped
	}
}

// appendEncoded appends EncodeValue(raw) to dst.
func appendEncoded(dst []byte, raw string) []byte {
	return appendEncodedForm(dst, raw, formUnknown)
}

// appendEncodedForm appends EncodeValue(raw) to dst; f is raw's form, or formUnknown.
func appendEncodedForm(dst []byte, raw string, f form) []byte {
	if f == formUnknown {
		_, f = encodedLen(raw)
	}
	switch f {
	case formPlain:
		return append(dst, raw...)
	case formEscaped:
		return appendEscaped(dst, raw)
	default:
		return appendHashed(dst, raw)
	}
}

// appendEscaped appends raw with every byte outside passThrough written as %XX.
func appendEscaped(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if escapeCost[c] == 0 {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', upperHex[c>>4], upperHex[c&0xF])
	}
	return dst
}

// appendHashed appends the hashed form of raw: '#' and the hex of a SHA-256 prefix.
func appendHashed(dst []byte, raw string) []byte {
	sum := sha256.Sum256([]byte(raw))
	dst = append(dst, hashedPrefix)
	return hex.AppendEncode(dst, sum[:hashedBytes])
}
