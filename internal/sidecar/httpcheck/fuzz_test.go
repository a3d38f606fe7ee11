package httpcheck_test

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
)

// FuzzDecodeCheckRequest: any body either decodes to a request naming a policy with a
// non-negative cost, or is refused with an error; never a panic.
func FuzzDecodeCheckRequest(f *testing.F) {
	for _, s := range []string{`{"policy":"a","identity":"b","cost":2,"requestId":"r"}`, `{}`, `{"policy":1}`,
		`{"policy":"a"}{}`, `{"policy":"a","cost":-5}`, "\xff", `{"policy":"a","identity":"\u0000{x}"}`, `[]`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req checkwire.Request
		if err := httpcheck.Decode(body, &req); err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if req.Policy == "" || req.Cost < 0 {
			t.Fatalf("accepted %q as %+v", body, req)
		}
	})
}
