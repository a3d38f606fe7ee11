package httppath

import "errors"

// The reasons a path is refused. Normalize and ParseTarget wrap them with the byte offset
// where the problem starts; test for them with errors.Is.
var (
	// ErrNotOriginForm refuses a path that does not start with "/".
	ErrNotOriginForm = errors.New(`the path does not start with "/"`)
	// ErrAsterisk refuses the asterisk-form "*" with a method other than OPTIONS.
	ErrAsterisk = errors.New(`the asterisk-form request target "*" is only valid with OPTIONS`)
	// ErrEncodedSlash refuses "%2F".
	ErrEncodedSlash = errors.New("encoded slash (%2F): servers disagree whether it separates segments")
	// ErrBackslash refuses "\" and "%5C".
	ErrBackslash = errors.New(`backslash ("\" or %5C): servers disagree whether it is a slash`)
	// ErrControl refuses NUL and control bytes, raw or encoded (%00-%1F, %7F).
	ErrControl = errors.New("NUL or control byte (%00-%1F, %7F): servers truncate, strip or refuse it")
	// ErrBadEscape refuses a "%" not followed by two hex digits.
	ErrBadEscape = errors.New("invalid percent escape: servers refuse it, keep it or decode part of it")
	// ErrQueryOrFragment refuses a raw "?" or "#" in what should be the path alone.
	ErrQueryOrFragment = errors.New(`raw "?" or "#" in the path: servers disagree where the path ends`)
)
