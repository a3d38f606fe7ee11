package keylayout

import "fmt"

// MaxTemplateLen is the maximum length of a template's source text, in bytes.
const MaxTemplateLen = 512

// Parse parses a key template: literal text with ${name} variables, where name is one of the
// Var* constants. Literal '{' and '}' are Redis hash-tag braces and must pair up without
// nesting. When allowed is not empty, only the variables it names may be used. Errors name
// the problem and its byte offset in s.
func Parse(s string, allowed ...string) (*Template, error) {
	set, err := allowedSet(allowed)
	if err != nil {
		return nil, err
	}
	if err := checkLength(s); err != nil {
		return nil, err
	}
	t, braces, err := parseBody(s, set)
	if err != nil {
		return nil, err
	}
	if err := t.setTag(braces); err != nil {
		return nil, err
	}
	return t, nil
}

// MustParse is like Parse but panics when the template is invalid. It is meant for templates
// fixed at compile time.
func MustParse(s string, allowed ...string) *Template {
	t, err := Parse(s, allowed...)
	if err != nil {
		panic(err)
	}
	return t
}

// allowedSet turns the allowed variable names into a set; empty means all variables.
func allowedSet(allowed []string) (varSet, error) {
	if len(allowed) == 0 {
		return allVars, nil
	}
	var set varSet
	for _, name := range allowed {
		id, ok := lookupVar(name)
		if !ok {
			return 0, fmt.Errorf("allowed variable %q is not a known variable (known: %s)", name, allVars)
		}
		set |= 1 << id
	}
	return set, nil
}

// checkLength rejects empty and over-long templates.
func checkLength(s string) error {
	if s == "" {
		return fmt.Errorf("empty key template")
	}
	if len(s) > MaxTemplateLen {
		return fmt.Errorf("key template too long: %d bytes, the maximum is %d (excess starts at offset %d)",
			len(s), MaxTemplateLen, MaxTemplateLen)
	}
	return nil
}

// parseBody splits s into literals and variables and checks the hash-tag braces.
func parseBody(s string, allowed varSet) (*Template, *braceChecker, error) {
	t := &Template{src: s}
	braces := newBraceChecker()
	litStart := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '$':
			id, end, err := parseVar(s, i, allowed)
			if err != nil {
				return nil, nil, err
			}
			t.addVar(s[litStart:i], id)
			litStart, i = end, end-1
		case '{', '}':
			if err := braces.visit(s[i], i); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := braces.finish(); err != nil {
		return nil, nil, err
	}
	t.lits = append(t.lits, s[litStart:])
	t.litLen += len(s) - litStart
	return t, braces, nil
}

// addVar appends the literal preceding a variable and the variable itself.
func (t *Template) addVar(lit string, id varID) {
	t.lits = append(t.lits, lit)
	t.litLen += len(lit)
	t.vars = append(t.vars, id)
	t.used |= 1 << id
}

// parseVar parses the variable reference starting with the '$' at offset at and returns its
// variable and the offset just past its closing '}'.
func parseVar(s string, at int, allowed varSet) (varID, int, error) {
	if at+1 >= len(s) || s[at+1] != '{' {
		return 0, 0, fmt.Errorf("'$' at offset %d is not followed by '{': write variables as ${name}", at)
	}
	start := at + 2
	end := start
	for end < len(s) && isNameByte(s[end]) {
		end++
	}
	name := s[start:end]
	switch {
	case end == len(s):
		return 0, 0, fmt.Errorf("unterminated variable %q at offset %d: missing '}'", s[at:], at)
	case s[end] != '}':
		return 0, 0, fmt.Errorf("invalid byte %q at offset %d in the name of the variable at offset %d",
			s[end], end, at)
	case name == "":
		return 0, 0, fmt.Errorf("empty variable name \"${}\" at offset %d", at)
	}
	id, err := checkVar(name, at, allowed)
	return id, end + 1, err
}

// checkVar resolves a variable name and checks that it is allowed.
func checkVar(name string, at int, allowed varSet) (varID, error) {
	id, ok := lookupVar(name)
	if !ok {
		return 0, fmt.Errorf("unknown variable %q at offset %d (allowed: %s)", name, at, allowed)
	}
	if !allowed.has(id) {
		return 0, fmt.Errorf("variable %q at offset %d is not allowed here (allowed: %s)", name, at, allowed)
	}
	return id, nil
}

// isNameByte reports whether c may appear in a variable name.
func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// braceChecker checks that literal hash-tag braces pair up without nesting, and records the
// first pair, which delimits the hash tag.
type braceChecker struct {
	open              int // offset of the '{' not yet closed, or -1
	tagOpen, tagClose int // offsets of the first pair, or -1
}

// newBraceChecker returns a checker that has seen no braces.
func newBraceChecker() *braceChecker {
	return &braceChecker{open: -1, tagOpen: -1, tagClose: -1}
}

// visit checks the brace c at offset at.
func (b *braceChecker) visit(c byte, at int) error {
	switch {
	case c == '{' && b.open >= 0:
		return fmt.Errorf("nested '{' at offset %d: the '{' at offset %d is not closed yet", at, b.open)
	case c == '{':
		b.open = at
	case b.open < 0:
		return fmt.Errorf("unbalanced '}' at offset %d: no '{' before it", at)
	default:
		if b.tagOpen < 0 {
			b.tagOpen, b.tagClose = b.open, at
		}
		b.open = -1
	}
	return nil
}

// finish checks that no '{' is left open.
func (b *braceChecker) finish() error {
	if b.open >= 0 {
		return fmt.Errorf("unclosed '{' at offset %d", b.open)
	}
	return nil
}

// setTag records the hash tag found by b and parses its text for ExpandTag. An empty tag
// ("{}") is no tag: Redis hashes the whole key.
func (t *Template) setTag(b *braceChecker) error {
	if b.tagOpen < 0 {
		return nil
	}
	if b.tagClose == b.tagOpen+1 {
		t.emptyTag = true
		return nil
	}
	src := t.src[b.tagOpen+1 : b.tagClose]
	// The tag text holds no braces and only variables the whole template was allowed.
	tag, _, err := parseBody(src, allVars)
	if err != nil {
		return fmt.Errorf("parse hash tag %q at offset %d: %w", src, b.tagOpen, err)
	}
	t.tag, t.tagSrc = tag, src
	return nil
}
