package keylayout

import "strings"

// Expand returns the key for the values v: the template with every ${name} replaced by
// EncodeValue of the matching field of v. Empty values, and all values of a nil v, expand to
// empty text. It allocates only the returned string, plus a copy of each value long enough
// to take EncodeValue's hashed form, which SHA-256 reads as a byte slice.
func (t *Template) Expand(v *Values) string {
	var forms [maxCachedForms]form
	var b strings.Builder
	b.Grow(t.expandedLen(v, &forms))
	for i, id := range t.vars {
		b.WriteString(t.lits[i])
		raw := v.value(id)
		f := formUnknown
		if i < maxCachedForms {
			f = forms[i]
		}
		if f == formPlain {
			b.WriteString(raw)
		} else {
			writeEncoded(&b, raw, f)
		}
	}
	b.WriteString(t.lits[len(t.vars)])
	return b.String()
}

// writeEncoded writes EncodeValue(raw) to b, using a stack buffer instead of a temporary
// string; f is raw's form, or formUnknown.
func writeEncoded(b *strings.Builder, raw string, f form) {
	var scratch [MaxEncodedLen]byte
	b.Write(appendEncodedForm(scratch[:0], raw, f))
}

// AppendExpand appends the key for the values v, as Expand returns it, to dst and returns the
// extended buffer.
func (t *Template) AppendExpand(dst []byte, v *Values) []byte {
	for i, id := range t.vars {
		dst = append(dst, t.lits[i]...)
		dst = appendEncoded(dst, v.value(id))
	}
	return append(dst, t.lits[len(t.vars)]...)
}

// ExpandTag returns the hash tag of Expand(v): the expansion of the text that HashTag
// returns. ok is false when Redis hashes the whole key instead: the template has no hash tag,
// or its tag consists only of variables that all expand to empty text here. When ok is true,
// Slot(t.Expand(v)) == Slot(tag).
func (t *Template) ExpandTag(v *Values) (tag string, ok bool) {
	if t.tag == nil {
		return "", false
	}
	tag = t.tag.Expand(v)
	return tag, tag != ""
}

// maxCachedForms is how many variables' encoding forms Expand remembers between computing
// the key's length and writing it; later variables are scanned twice.
const maxCachedForms = 8

// expandedLen returns the length of Expand(v) and records the form of the first
// maxCachedForms variables in forms.
func (t *Template) expandedLen(v *Values, forms *[maxCachedForms]form) int {
	n := t.litLen
	for i, id := range t.vars {
		l, f := encodedLen(v.value(id))
		if i < maxCachedForms {
			forms[i] = f
		}
		n += l
	}
	return n
}
