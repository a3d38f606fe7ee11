package usageapi

import (
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// TestContinuationRoundTrip: every position comes back from its continuation, which is
// short and URL-safe.
func TestContinuationRoundTrip(t *testing.T) {
	for _, at := range []limiter.ScanPosition{{}, {Primary: 0, Cursor: 1}, {Primary: 2, Cursor: 917504},
		{Primary: math.MaxUint16, Cursor: math.MaxUint64}} {
		c := encodeContinuation(at)
		got, err := decodeContinuation(c)
		if err != nil || got != at || len(c) > maxContinuationLen || strings.ContainsAny(c, "+/=%&") {
			t.Errorf("%+v: %q decodes to %+v, %v", at, c, got, err)
		}
	}
}

// TestForgedContinuationRefused: anything encodeContinuation does not make is refused, so a
// client can only name a position, never other text for the server to read.
func TestForgedContinuationRefused(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []string{
		"", "c1.0.0", "%%%", enc("c1.0"), enc("c1.0.0.0"), enc("c2.0.0"), enc("c1.-1.0"), enc("c1.0.-1"),
		enc("c1.+1.0"), enc("c1.01.0"), enc("c1.0.007"), enc("c1.65536.0"), enc("c1.0.18446744073709551616"),
		enc("c1. 1.0"), enc("c1.0.1\n"), enc("c1.0.1") + "=", strings.Repeat("A", maxContinuationLen+4),
	} {
		if at, err := decodeContinuation(c); !errors.Is(err, errBadContinuation) {
			t.Errorf("%q: %+v, %v; want errBadContinuation", c, at, err)
		}
	}
}
