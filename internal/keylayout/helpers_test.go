package keylayout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// checkEncoded returns an error unless enc is a well-formed EncodeValue output for raw: at
// most MaxEncodedLen bytes of allowed bytes only, and the plain, escaped or hashed form that
// raw calls for.
func checkEncoded(raw, enc string) error {
	if len(enc) > MaxEncodedLen {
		return fmt.Errorf("EncodeValue(%.40q...) is %d bytes, more than %d", raw, len(enc), MaxEncodedLen)
	}
	if err := checkAlphabet(enc); err != nil {
		return fmt.Errorf("EncodeValue(%.40q...) = %q: %w", raw, enc, err)
	}
	if strings.HasPrefix(enc, "#") {
		sum := sha256.Sum256([]byte(raw))
		if want := "#" + hex.EncodeToString(sum[:30]); enc != want {
			return fmt.Errorf("EncodeValue(%.40q...) = %q, want hashed form %q", raw, enc, want)
		}
		if n, _ := escapedLen(raw); n <= MaxEncodedLen {
			return fmt.Errorf("EncodeValue(%.40q...) hashed a value whose escaped form fits", raw)
		}
		return nil
	}
	dec, err := decodeEscaped(enc)
	if err != nil {
		return fmt.Errorf("EncodeValue(%.40q...) = %q: %w", raw, enc, err)
	}
	if dec != raw {
		return fmt.Errorf("EncodeValue(%.40q...) = %q decodes to %q", raw, enc, dec)
	}
	return nil
}

// checkAlphabet returns an error if enc holds a byte that EncodeValue must never output.
func checkAlphabet(enc string) error {
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case c == '{', c == '}', c == ':', c == ' ', c == '\t', c == '\r', c == '\n', c < 0x20, c >= 0x7f:
			return fmt.Errorf("forbidden byte %q at offset %d", c, i)
		case c == '#' && i > 0:
			return fmt.Errorf("'#' at offset %d, not at the start", i)
		case c == '%' && !isEscape(enc[i:]):
			return fmt.Errorf("'%%' at offset %d is not an uppercase %%XX escape", i)
		}
	}
	return nil
}

// isEscape reports whether s starts with %XX, XX two uppercase hex digits.
func isEscape(s string) bool {
	isHex := func(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }
	return len(s) >= 3 && s[0] == '%' && isHex(s[1]) && isHex(s[2])
}

// escapedLen returns the length of raw's percent-encoded form and how many bytes it escapes,
// computed independently of the package's encodedLen.
func escapedLen(raw string) (n, escaped int) {
	for _, c := range []byte(raw) {
		if strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@/+=-", c) < 0 {
			escaped++
		}
	}
	return len(raw) + 2*escaped, escaped
}

// decodeEscaped inverts the percent-encoded form; that it exists proves the form injective.
func decodeEscaped(enc string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		if enc[i] != '%' {
			b.WriteByte(enc[i])
			continue
		}
		v, err := hex.DecodeString(enc[i+1 : i+3])
		if err != nil {
			return "", fmt.Errorf("bad escape at offset %d: %w", i, err)
		}
		if strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@/+=-", v[0]) >= 0 {
			return "", fmt.Errorf("escape at offset %d encodes pass-through byte %q", i, v[0])
		}
		b.WriteByte(v[0])
		i += 2
	}
	return b.String(), nil
}

// checkKey returns an error unless key, expanded from tmpl with v, hashes like its expanded
// hash tag: Slot(key) is the slot of the tag, or of the whole key when ExpandTag says Redis
// hashes the whole key.
func checkKey(tmpl *Template, v *Values, key string) error {
	tag, ok := tmpl.ExpandTag(v)
	want := crc16Bitwise(key) % SlotCount
	if ok {
		want = crc16Bitwise(tag) % SlotCount
		if got := Tag(key); got != tag {
			return fmt.Errorf("Tag(%q) = %q, ExpandTag = %q", key, got, tag)
		}
		if got := Slot("{" + tag + "}"); got != want {
			return fmt.Errorf("Slot of {%s} = %d, crc of the tag %d", tag, got, want)
		}
	}
	if got := Slot(key); got != want {
		return fmt.Errorf("Slot(%q) = %d, want %d (tag %q, ok %v)", key, got, want, tag, ok)
	}
	return nil
}
