package responsecost

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The bounds on what Watch reads (the package documentation explains them).
const (
	// MaxCost is the largest cost a response may state.
	MaxCost = 1 << 40
	// MaxJSONBody is the most of a JSON body Watch buffers; a longer body states no cost
	// through Field.
	MaxJSONBody = 1 << 20
	// MaxEventData is the most data one text/event-stream event may carry (its data lines
	// joined with "\n"); a longer event is dropped.
	MaxEventData = 1 << 20
	// MaxPathSegments is the most segments a Field path may have.
	MaxPathSegments = 8
	// MaxPathBytes is the longest a Field path may be.
	MaxPathBytes = 256
	// MaxHeaderName is the longest a Header name may be.
	MaxHeaderName = 256
)

// Source says where a response states its request's cost. At least one of Header and
// Field is set; with both, a Header the response carries decides (see the package
// documentation).
type Source struct {
	// Header is a response header (or trailer) whose value is the cost, a whole number.
	Header string
	// Field is a dot path into a JSON object, such as "usage.total_tokens": read from an
	// application/json (or +json) body, or from the data of every text/event-stream event
	// whose data is a JSON object holding it (the last one wins). Each segment is an
	// object key, matched exactly as the JSON writes it (unescaped).
	Field string
}

// Validate says what is wrong with s, naming the field ("header", "field").
func (s Source) Validate() error {
	if s.Header == "" && s.Field == "" {
		return errors.New("header, field: at least one is required")
	}
	if s.Header != "" {
		if err := validateHeaderName(s.Header); err != nil {
			return fmt.Errorf("header: %w", err)
		}
	}
	if s.Field != "" {
		if _, err := parsePath(s.Field); err != nil {
			return fmt.Errorf("field: %w", err)
		}
	}
	return nil
}

// validateHeaderName refuses what is not an HTTP field name (RFC 9110 section 5.1: a token).
func validateHeaderName(name string) error {
	if len(name) > MaxHeaderName {
		return fmt.Errorf("at most %d bytes, got %d", MaxHeaderName, len(name))
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Errorf("%q is not a header name: byte %d (%q) is not a token character", name, i, name[i])
		}
	}
	return nil
}

// isTokenChar says whether c is a tchar of RFC 9110 section 5.6.2.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return c < 0x80 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// parsePath splits a Field path into its segments, refusing an empty segment, too many
// segments or bytes, and a segment JSON could not hold unescaped.
func parsePath(field string) ([]string, error) {
	if len(field) > MaxPathBytes {
		return nil, fmt.Errorf("at most %d bytes, got %d", MaxPathBytes, len(field))
	}
	if n := strings.Count(field, ".") + 1; n > MaxPathSegments {
		return nil, fmt.Errorf("%q: at most %d segments, got %d", field, MaxPathSegments, n)
	}
	segs := strings.Split(field, ".")
	for i, seg := range segs {
		if err := validateSegment(seg); err != nil {
			return nil, fmt.Errorf("%q: segment %d: %w", field, i+1, err)
		}
	}
	return segs, nil
}

// validateSegment refuses an empty segment and one that a JSON key holds only escaped: a
// control byte, `"`, `\` or invalid UTF-8.
func validateSegment(seg string) error {
	if seg == "" {
		return errors.New("empty")
	}
	if !utf8.ValidString(seg) {
		return errors.New("not valid UTF-8")
	}
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; c < 0x20 || c == '"' || c == '\\' {
			return fmt.Errorf("byte %d (%q): a control byte, '\"' or '\\' is not matched", i, c)
		}
	}
	return nil
}
