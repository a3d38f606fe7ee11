package inject

import "fmt"

// AnnotationError is a Pod's annotation (or label) the sidecar cannot be injected with: the
// webhook denies the Pod with its message, which names the annotation and the value.
type AnnotationError struct {
	// Annotation is the annotation (or label) to fix, e.g. ratelimit.dev/mode.
	Annotation string
	// Value is the value it holds.
	Value string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s: %q %s", e.Annotation, e.Value, e.Reason)
}

// annotationError builds an *AnnotationError with a formatted reason.
func annotationError(annotation, value, format string, args ...any) *AnnotationError {
	return &AnnotationError{Annotation: annotation, Value: value, Reason: fmt.Sprintf(format, args...)}
}
