package httppath_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/login", "/login"},
		{"/./login", "/login"},
		{"//login", "/login"},
		{"///a////b//", "/a/b/"},
		{"/x/../login", "/login"},
		{"/%6Cogin", "/login"},
		{"/%6cogin", "/login"},
		{"/%2e%2e/login", "/login"},
		{"/%2E/login", "/login"},
		{"/a/%2e%2E", "/"},
		{"/../x", "/x"},
		{"/../../x/..", "/"},
		{"/a/b/..", "/a/"},
		{"/a/b/.", "/a/b/"},
		{"/a/./b/../c", "/a/c"},
		{"/a//../b", "/b"}, // slashes merge before dots resolve, as nginx does
		{"/...", "/..."},
		{"/..a/.b", "/..a/.b"},
		{"/LOGIN", "/LOGIN"},
		{"/login;x=1", "/login;x=1"},
		{"/x/..;/login", "/x/..;/login"},
		{"/%41%7e%2d%5F%30", "/A~-_0"},
		{"/%c3%a9", "/%C3%A9"},
		{"/%3b%3F%23%25%20", "/%3B%3F%23%25%20"},
		{"/é", "/%C3%A9"},
		{"/a b{c}|d^e`f\"<>[]", "/a%20b%7Bc%7D%7Cd%5Ee%60f%22%3C%3E%5B%5D"},
		{"/!$&'()*+,;=:@", "/!$&'()*+,;=:@"},
	} {
		got, err := httppath.Normalize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestNormalizeRefuses(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
		at   string
	}{
		{"", httppath.ErrNotOriginForm, "byte 0"},
		{"login", httppath.ErrNotOriginForm, "byte 0"},
		{"*", httppath.ErrNotOriginForm, "byte 0"},
		{`\login`, httppath.ErrNotOriginForm, "byte 0"},
		{"/%2Flogin", httppath.ErrEncodedSlash, "byte 1"},
		{"/login%2f..", httppath.ErrEncodedSlash, "byte 6"},
		{`/a\b`, httppath.ErrBackslash, "byte 2"},
		{"/a%5cb", httppath.ErrBackslash, "byte 2"},
		{"/a%00", httppath.ErrControl, "byte 2"},
		{"/a%1F", httppath.ErrControl, "byte 2"},
		{"/a%7f", httppath.ErrControl, "byte 2"},
		{"/a\x00", httppath.ErrControl, "byte 2"},
		{"/a\n", httppath.ErrControl, "byte 2"},
		{"/a%zz", httppath.ErrBadEscape, "byte 2"},
		{"/a%4", httppath.ErrBadEscape, "byte 2"},
		{"/a%", httppath.ErrBadEscape, "byte 2"},
		{"/a%+1", httppath.ErrBadEscape, "byte 2"},
		{"/a?b", httppath.ErrQueryOrFragment, "byte 2"},
		{"/a#b", httppath.ErrQueryOrFragment, "byte 2"},
		{`/%zz\`, httppath.ErrBadEscape, "byte 1"}, // the first problem is reported
	} {
		got, err := httppath.Normalize(tc.in)
		if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), tc.at+": ") {
			t.Errorf("Normalize(%q) = %q, %v; want %s: %v", tc.in, got, err, tc.at, tc.want)
		}
	}
}
