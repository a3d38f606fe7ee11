package usageapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// continuationVersion begins every continuation, so that a later form can be told apart.
const continuationVersion = "c1"

// maxContinuationLen bounds the continue parameter: "c1.<primary>.<cursor>" of the largest
// numbers is 47 bytes, 64 in base64.
const maxContinuationLen = 64

// errBadContinuation is the error of a continue parameter this server did not give.
var errBadContinuation = errors.New("not a continuation of this server's overview: start again without it")

// encodeContinuation is the continue parameter of position at: opaque to clients (base64url
// of "c1.<primary>.<cursor>"). It is only a place in the keyspace, so it needs no signature:
// any position a client makes up reads the same policy's keys (limiter.CallersStep).
func encodeContinuation(at limiter.ScanPosition) string {
	raw := fmt.Sprintf("%s.%d.%d", continuationVersion, at.Primary, at.Cursor)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// decodeContinuation is the position of a continue parameter, or errBadContinuation for
// anything encodeContinuation does not make.
func decodeContinuation(s string) (limiter.ScanPosition, error) {
	if len(s) > maxContinuationLen {
		return limiter.ScanPosition{}, errBadContinuation
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return limiter.ScanPosition{}, errBadContinuation
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[0] != continuationVersion {
		return limiter.ScanPosition{}, errBadContinuation
	}
	primary, err := strconv.ParseUint(parts[1], 10, 16)
	if err != nil || parts[1] != strconv.FormatUint(primary, 10) {
		return limiter.ScanPosition{}, errBadContinuation
	}
	cursor, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || parts[2] != strconv.FormatUint(cursor, 10) {
		return limiter.ScanPosition{}, errBadContinuation
	}
	return limiter.ScanPosition{Primary: int(primary), Cursor: cursor}, nil
}
