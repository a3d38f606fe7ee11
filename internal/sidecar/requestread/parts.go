package requestread

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// MaxParts is the most parts a composite identity has (the API's bound); the engine refuses
// a snapshot entry with more when it is loaded.
const MaxParts = 4

// missingPart stands for a part that yielded no value, under onMissing Shared: a token no
// value's token can be, since those begin with a digit.
const missingPart = '-'

// composeParts is the identity of a composite: each part's value (sourced within its chain:
// from[k] is the source's position, -1 for none, statedPart for a value stated whole)
// written as its length in decimal, '.' and the value, or missingPart, the parts joined by
// '+' ("5.key-1+4./api" for key-1 on /api). Each
// token says where it ends, so the encoding is injective: no value of one part, whatever
// separators it holds, can make another combination's identity. A missing part makes the
// request have no identity under onMissing Reject and Skip; under Shared it is missingPart,
// one shared value of its own, and the other parts still count apart.
func composeParts(ident *snapshot.Identity, from []int, vals []string) (string, bool, error) {
	var buf [128]byte
	b := buf[:0]
	for k, i := range from {
		if k > 0 {
			b = append(b, '+')
		}
		if i == -1 {
			if m := ident.OnMissing; m == snapshot.MissingReject || m == snapshot.MissingSkip {
				return "", false, nil
			}
			b = append(b, missingPart)
			continue
		}
		n := len(vals[k])
		if i != statedPart && len(ident.Parts[k].Sources) > 1 {
			n += len(strconv.Itoa(i)) + 1
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, '.')
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, '=')
		} else {
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, '.')
		}
		b = append(b, vals[k]...)
	}
	return string(b), true, nil
}

// statedPart stands, in composeParts' from, for a value stated whole by the caller (the
// check API), already as its part yields it.
const statedPart = -2

// ErrNotComposite and ErrPartCount refuse a check API request whose stated parts do not fit
// its policy's identity.
var (
	ErrNotComposite = errors.New("the policy's identity has no parts: state the identity")
	ErrPartCount    = errors.New("state one value per part of the policy's identity, in order (empty for a missing part)")
)

// StatedParts is the identity, for policy e, of a composite whose part values a trusted
// caller states (the check API), each as its part yields it (a part of several sources: the
// source's position, '=' and the value), "" for a missing part: the identity an HTTP
// request or an Envoy descriptor with those values has, so every front spends the same
// counters. ok is false when a part is missing and onMissing is Reject or Skip.
func StatedParts(e *snapshot.Entry, values []string) (id string, ok bool, err error) {
	n := len(e.Identity.Parts)
	switch {
	case n == 0:
		return "", false, ErrNotComposite
	case len(values) != n:
		return "", false, fmt.Errorf("%d values for %d parts: %w", len(values), n, ErrPartCount)
	}
	var from [MaxParts]int
	for k, v := range values {
		from[k] = statedPart
		if v == "" {
			from[k] = -1
		}
	}
	return composeParts(&e.Identity, from[:n], values)
}
