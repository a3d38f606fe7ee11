package limiter

import (
	"fmt"
	"strings"
)

// FieldError is a problem with one field of a Spec, named by its path in the
// RateLimitPolicy spec ("limits[1].period", "keyLayout.state"), so the admission webhook and
// the controller can report it against the user's YAML.
type FieldError struct {
	// Field is the spec-relative path of the offending field.
	Field string
	// Detail says what is wrong and what to do.
	Detail string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// FieldErrors are every problem NewPolicy found.
type FieldErrors []*FieldError

func (e FieldErrors) Error() string {
	msgs := make([]string, len(e))
	for i, fe := range e {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e *FieldErrors) add(field, format string, args ...any) {
	*e = append(*e, &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}
