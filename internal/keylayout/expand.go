package keylayout

import "strings"

// Expand returns the key for the values v: the template with every ${name} replaced by
// EncodeValue of the matching field of v. Empty values, and all values of a nil v, expand to
// empty text. It allocates only the returned string.
func (t *Template) Expand(v *Values) string {
	var b strings.Builder
	b.Grow(t.expandedLen(v))
	var scratch [MaxEncodedLen]byte
	for i, id := range t.vars {
		b.WriteString(t.lits[i])
		raw := v.value(id)
		if _, f := encodedLen(raw); f == formPlain {
			b.WriteString(raw)
		} else {
			b.Write(appendEncoded(scratch[:0], raw))
		}
	}
	b.WriteString(t.lits[len(t.vars)])
	return b.String()
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

// expandedLen returns the length of Expand(v).
func (t *Template) expandedLen(v *Values) int {
	n := t.litLen
	for _, id := range t.vars {
		l, _ := encodedLen(v.value(id))
		n += l
	}
	return n
}
