package httppath_test

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

func TestPrefixMatches(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		yes    []string
		no     []string
	}{
		{"/login",
			[]string{"/login", "/login/", "/login/x", "/./login", "//login", "/x/../login", "/%6Cogin", "/LOGIN", "/LoGiN/x",
				"/login;jsessionid=x", "/login;a/b", "/x/..;/login", "/x;y/..;z/login", "/login%3Bx", "/.;x/login", "/login/.;"},
			[]string{"/", "/loginx", "/log", "/login~", "/x/login", "/login%2Fx", "/%2Flogin", "/x/.../login"}},
		{"/login/", []string{"/login", "/login/", "/login/x"}, []string{"/loginx"}},
		{"/", []string{"/", "/a", "/a/b"}, []string{"*"}},
		{"/%6cogin", []string{"/login", "/LOGIN"}, []string{"/logi"}},
		{"/a/../login/./", []string{"/login/x"}, []string{"/a/login"}},
		{"/API/V1", []string{"/api/v1/x"}, []string{"/api/v2"}},
		{"/login;x", []string{"/login", "/login;y"}, []string{"/loginx"}},
		{"/%C3%A9", []string{"/é", "/%c3%a9/x"}, []string{"/%C3%89"}}, // only ASCII letters fold
		{"/a%2Fb", nil, []string{"/a/b", "/a%2Fb", "/"}},              // refused as a path: matches nothing
		{`/a\b`, nil, []string{`/a\b`, "/a/b"}},
	} {
		pre := httppath.NewPrefix(tc.prefix)
		for _, path := range tc.yes {
			if p, err := httppath.ParseTarget("OPTIONS", path); err != nil || !pre.Matches(p) {
				t.Errorf("prefix %q must match %q (%v)", tc.prefix, path, err)
			}
		}
		for _, path := range tc.no {
			if p, err := httppath.ParseTarget("OPTIONS", path); err == nil && pre.Matches(p) {
				t.Errorf("prefix %q must not match %q", tc.prefix, path)
			}
		}
	}
}
