package httppath_test

import (
	"errors"
	"strconv"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

// The reference normalizer: a second, deliberately simple implementation that shares no
// code with the package. It reads the path into tokens (a raw byte, or the byte an escape
// stands for), judges and re-encodes them one by one, then splits the result into segments
// and resolves them with a stack. The package instead rewrites one output buffer in place.

const (
	refUnreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	refRawOK      = "!$&'()*+,;=:@" // sub-delims, ":" and "@": pchar besides unreserved
)

// refNormalize is Normalize, written the simple way.
func refNormalize(s string) (string, error) {
	if !strings.HasPrefix(s, "/") {
		return "", httppath.ErrNotOriginForm
	}
	var canon strings.Builder
	for i := 0; i < len(s); i++ {
		b, escaped := s[i], false
		if b == '%' {
			if len(s) < i+3 || strings.ContainsAny(s[i+1:i+3], "+-") {
				return "", httppath.ErrBadEscape
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", httppath.ErrBadEscape
			}
			b, escaped = byte(v), true
			i += 2
		}
		enc, err := refEncode(b, escaped)
		if err != nil {
			return "", err
		}
		canon.WriteString(enc)
	}
	return refResolve(strings.Split(canon.String()[1:], "/")), nil
}

// refEncode is how byte b (escaped: it arrived percent-encoded) is written, or why it is refused.
func refEncode(b byte, escaped bool) (string, error) {
	switch {
	case b == '/' && escaped:
		return "", httppath.ErrEncodedSlash
	case b == '\\':
		return "", httppath.ErrBackslash
	case b < 0x20 || b == 0x7f:
		return "", httppath.ErrControl
	case (b == '?' || b == '#') && !escaped:
		return "", httppath.ErrQueryOrFragment
	case strings.IndexByte(refUnreserved, b) >= 0, b == '/', !escaped && strings.IndexByte(refRawOK, b) >= 0:
		return string([]byte{b}), nil
	}
	return "%" + strings.ToUpper(strconv.FormatUint(uint64(b)>>4, 16)+strconv.FormatUint(uint64(b)&15, 16)), nil
}

// refResolve joins segments after merging empty ones and resolving "." and "..".
func refResolve(segments []string) string {
	var stack []string
	trailing := false
	for _, seg := range segments {
		trailing = seg == "" || seg == "." || seg == ".."
		switch {
		case seg == ".." && len(stack) > 0:
			stack = stack[:len(stack)-1]
		case !trailing:
			stack = append(stack, seg)
		}
	}
	out := "/" + strings.Join(stack, "/")
	if trailing && len(stack) > 0 {
		out += "/"
	}
	return out
}

// refSegments are the segments a prefix is compared with: those of the normalized path with
// each one's parameters cut, resolved again, lower-cased, without a trailing empty one.
func refSegments(normalized string) []string {
	segs := strings.Split(normalized[1:], "/")
	for i, seg := range segs {
		for _, sep := range []string{";", "%3B"} {
			if j := strings.Index(seg, sep); j >= 0 {
				seg = seg[:j]
			}
		}
		segs[i] = seg
	}
	resolved := strings.ToLower(refResolve(segs))
	out := strings.Split(resolved[1:], "/")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// refMatches is Prefix.Matches the simple way: the prefix's segments begin the path's.
func refMatches(prefix, path string) bool {
	p, perr := refNormalize(prefix)
	n, nerr := refNormalize(path)
	if perr != nil || nerr != nil {
		return false
	}
	ps, ns := refSegments(p), refSegments(n)
	if len(ps) > len(ns) {
		return false
	}
	for i := range ps {
		if ps[i] != ns[i] {
			return false
		}
	}
	return true
}

// reasons are the refusals, for comparing two errors by reason.
var reasons = []error{httppath.ErrNotOriginForm, httppath.ErrAsterisk, httppath.ErrEncodedSlash, httppath.ErrBackslash,
	httppath.ErrControl, httppath.ErrBadEscape, httppath.ErrQueryOrFragment}

// reason is the refusal err wraps, or nil.
func reason(err error) error {
	for _, r := range reasons {
		if errors.Is(err, r) {
			return r
		}
	}
	return nil
}
