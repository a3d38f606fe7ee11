package keylayout

// Template is a parsed key template. It is immutable and safe for concurrent use.
type Template struct {
	src  string
	lits []string // literal text; lits[i] precedes vars[i], the last one ends the template
	vars []varID  // variables in order of appearance
	used varSet
	// litLen is the total length of lits, precomputed for Expand's single allocation.
	litLen int
	// tag is the template text inside the hash tag, parsed; nil when there is none.
	tag *Template
	// tagSrc is the hash tag's text as written, without the braces.
	tagSrc string
	// emptyTag is true when the first brace pair is "{}", which Redis ignores.
	emptyTag bool
}

// EmptyTag reports whether the template's first brace pair is the empty tag "{}", which
// Redis ignores (it then hashes the whole key): almost always a mistake in a layout.
func (t *Template) EmptyTag() bool { return t.emptyTag }

// String returns the template's source text.
func (t *Template) String() string { return t.src }

// Uses reports whether the template contains the variable ${name}.
func (t *Template) Uses(name string) bool {
	id, ok := lookupVar(name)
	return ok && t.used.has(id)
}

// Vars returns the names of the variables the template uses, sorted and without duplicates.
func (t *Template) Vars() []string { return t.used.names() }

// HashTag returns the template's Redis hash tag: the text between its first literal '{' and
// the first literal '}' after it, with ${...} variables as written. Variables count as opaque
// text without braces, which EncodeValue guarantees for expanded values. ok is false when the
// template has no tag or only an empty one ("{}"); Redis then hashes the whole key.
//
// When ok is true, every key expanded from the template hashes to the slot of the expanded
// tag, unless the tag consists only of variables that all expand to empty text; ExpandTag
// reports that case.
func (t *Template) HashTag() (tag string, ok bool) {
	return t.tagSrc, t.tag != nil
}

// TagNeverEmpty reports whether the hash tag expands to non-empty text for every Values in
// which the variables named in nonEmpty are not empty: the tag holds literal text or one of
// those variables. A tag made only of other variables (an identity that may be missing)
// expands to "{}" for empty values, which Redis ignores: it then hashes whole keys, so the
// keys of one call land on different Cluster slots. False when there is no tag.
func (t *Template) TagNeverEmpty(nonEmpty ...string) bool {
	if t.tag == nil {
		return false
	}
	if t.tag.litLen > 0 {
		return true
	}
	for _, name := range nonEmpty {
		if t.tag.Uses(name) {
			return true
		}
	}
	return false
}
