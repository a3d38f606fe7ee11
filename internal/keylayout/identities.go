package keylayout

import (
	"strings"
)

// IdentityPattern finds the keys a template expands to for every identity, the other
// variables fixed: Match is a glob for Redis's SCAN MATCH, and Identity reads the encoded
// identity back from a key that matched.
type IdentityPattern struct {
	// Match is the SCAN MATCH glob: the key with "*" where the identity goes.
	Match string
	// parts are the expanded text between the identity's occurrences (len = occurrences + 1).
	parts []string
}

// IdentityPattern is the pattern of t's keys for v with any identity (v.Identity is ignored).
// ok is false when t does not use ${identity}.
func (t *Template) IdentityPattern(v Values) (p *IdentityPattern, ok bool) {
	if !t.used.has(idIdentity) {
		return nil, false
	}
	p = &IdentityPattern{}
	var cur, glob strings.Builder
	for i, id := range t.vars {
		cur.WriteString(t.lits[i])
		glob.WriteString(globEscape(t.lits[i]))
		if id == idIdentity {
			p.parts = append(p.parts, cur.String())
			cur.Reset()
			glob.WriteByte('*')
			continue
		}
		enc := EncodeValue(v.value(id))
		cur.WriteString(enc)
		glob.WriteString(globEscape(enc))
	}
	cur.WriteString(t.lits[len(t.vars)])
	glob.WriteString(globEscape(t.lits[len(t.vars)]))
	p.parts = append(p.parts, cur.String())
	p.Match = glob.String()
	return p, true
}

// Identity is the encoded identity of key, a key the pattern's template expanded (every
// occurrence the same), or ok false for a key it did not.
func (p *IdentityPattern) Identity(key string) (encoded string, ok bool) {
	rest, ok := strings.CutPrefix(key, p.parts[0])
	if !ok {
		return "", false
	}
	end := len(rest) - len(p.parts[len(p.parts)-1])
	if len(p.parts) > 2 {
		end = strings.Index(rest, p.parts[1])
	}
	if end < 0 || end > len(rest) {
		return "", false
	}
	encoded = rest[:end]
	if strings.Join(p.parts, encoded) != key || len(encoded) > MaxEncodedLen {
		return "", false
	}
	return encoded, true
}

// DecodeValue is the raw value EncodeValue encoded as encoded, or ok false for the hashed
// form (which keeps only a digest) and for text EncodeValue never writes.
func DecodeValue(encoded string) (raw string, ok bool) {
	if strings.IndexByte(encoded, '%') < 0 {
		for i := 0; i < len(encoded); i++ {
			if escapeCost[encoded[i]] != 0 {
				return "", false
			}
		}
		return encoded, true
	}
	var b strings.Builder
	for i := 0; i < len(encoded); i++ {
		c := encoded[i]
		switch {
		case c == '%' && i+2 < len(encoded) && isUpperHex(encoded[i+1]) && isUpperHex(encoded[i+2]):
			b.WriteByte(unhex(encoded[i+1])<<4 | unhex(encoded[i+2]))
			i += 2
		case escapeCost[c] == 0:
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	raw = b.String()
	if EncodeValue(raw) != encoded {
		return "", false
	}
	return raw, true
}

func isUpperHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'A' + 10
}

// globEscape escapes the bytes Redis's glob matching treats as special.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
