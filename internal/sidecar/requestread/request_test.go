package requestread_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// TestParseTarget: every front reads a request target the same way: the normalized path,
// the raw query (never normalized: it is part of the idempotency fingerprint as sent), the
// absolute and asterisk forms, and a refused path as a BadRequestError naming the path.
func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		method, target, path, query string
	}{
		{"GET", "/api/x?page=2&a=%2F", "/api/x", "page=2&a=%2F"},
		{"GET", "//api/./x/", "/api/x/", ""},
		{"GET", "/api/%78?", "/api/x", ""},
		{"GET", "http://shop.example/api/x?q", "/api/x", "q"},
		{"OPTIONS", "*", "*", ""},
	} {
		p, q, err := requestread.ParseTarget(c.method, c.target)
		if err != nil || p.String() != c.path || q != c.query {
			t.Errorf("ParseTarget(%s %q) = %q, %q, %v; want %q, %q", c.method, c.target, p.String(), q, err, c.path, c.query)
		}
	}
	for _, target := range []string{"/api%2Fx", `/api\x`, "/a%00b", "api/x", "*"} {
		_, _, err := requestread.ParseTarget("GET", target)
		var bad *requestread.BadRequestError
		if !errors.As(err, &bad) || !strings.HasPrefix(bad.Error(), "path:") {
			t.Errorf("ParseTarget(GET %q): %v, want a BadRequestError naming the path", target, err)
		}
	}
}
