package httppath_test

import (
	"errors"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

func TestTargetPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/a/b?q=1", "/a/b"},
		{"/a%2Fb?x=/..", "/a%2Fb"},
		{"/a", "/a"},
		{"*", "*"},
		{"http://h.example/a/../b?q", "/a/../b"},
		{"https://h.example:8443", "/"},
		{"HTTP://h/x", "/x"},
		{"h.example:443", "h.example:443"},
		{`\login`, `\login`},
		{"", ""},
		{"?q", ""},
	} {
		if got := httppath.TargetPath(tc.in); got != tc.want {
			t.Errorf("TargetPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	p, err := httppath.ParseTarget("OPTIONS", "*")
	if err != nil || p.String() != "*" || httppath.NewPrefix("/").Matches(p) {
		t.Errorf(`OPTIONS *: %q, %v; must parse and match no prefix, not even "/"`, p, err)
	}
	if _, err := httppath.ParseTarget("GET", "*"); !errors.Is(err, httppath.ErrAsterisk) {
		t.Errorf("GET *: %v, want ErrAsterisk", err)
	}
	if p, err := httppath.ParseTarget("GET", "/a/./b"); err != nil || p.String() != "/a/b" {
		t.Errorf("GET /a/./b: %q, %v", p, err)
	}
	if httppath.NewPrefix("/").Matches(httppath.Path{}) {
		t.Error("the zero Path must match no prefix")
	}
}
