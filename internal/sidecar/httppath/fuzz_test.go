package httppath_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
)

// seeds are hostile paths for both fuzz targets (testdata/fuzz holds more).
var seeds = []string{
	"/", "", "*", "login", "/login", "/./login", "//login", "/x/../login", "/%6Cogin", "/%2e%2e/login",
	"/LOGIN", "/login;x=1", "/x/..;/login", "/login/", "/%2Flogin", "/login%2f..", `\login`, "/%5c",
	"/a%00", "/a%7f", "/a%zz", "/a%4", "/a%", "/a?b", "/a#b", "/../../x", "/a/b/../../..", "/a/.",
	"/a/..", "/.;x/a", "/a%3Bb/c", "/é/%c3%a9", "/{x}|[y]", "/a b", "/a//./../b//", "/%41%7e%2D",
}

// FuzzNormalize compares Normalize with the reference implementation and checks the
// properties every normalized path has.
func FuzzNormalize(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := httppath.Normalize(in)
		want, werr := refNormalize(in)
		if (err == nil) != (werr == nil) || !errors.Is(reason(err), reason(werr)) {
			t.Fatalf("Normalize(%q) = %q, %v; the reference says %q, %v", in, got, err, want, werr)
		}
		if err != nil {
			if reason(err) == nil {
				t.Fatalf("Normalize(%q): error %v wraps no reason", in, err)
			}
			return
		}
		if got != want {
			t.Fatalf("Normalize(%q) = %q, the reference says %q", in, got, want)
		}
		checkNormalized(t, in, got)
	})
}

// checkNormalized asserts the properties of got, the normalized form of in.
func checkNormalized(t *testing.T, in, got string) {
	t.Helper()
	if again, err := httppath.Normalize(got); err != nil || again != got {
		t.Fatalf("not idempotent: Normalize(%q) = %q, Normalize of that = %q, %v", in, got, again, err)
	}
	if !strings.HasPrefix(got, "/") || strings.Contains(got, "//") || strings.Contains(got, "/./") ||
		strings.Contains(got, "/../") || strings.HasSuffix(got, "/.") || strings.HasSuffix(got, "/..") {
		t.Fatalf("Normalize(%q) = %q holds an empty or dot segment", in, got)
	}
	// Forwarding: a URL whose Path is got decoded and whose RawPath is got sends exactly got.
	dec, err := url.PathUnescape(got)
	if err != nil {
		t.Fatalf("Normalize(%q) = %q does not decode: %v", in, got, err)
	}
	if u := (url.URL{Path: dec, RawPath: got}); u.EscapedPath() != got {
		t.Fatalf("Normalize(%q) = %q: a URL with it as RawPath sends %q", in, got, u.EscapedPath())
	}
}

// FuzzMatch compares Prefix.Matches with the reference's segment comparison, and checks that
// a path matches exactly what its normalized form matches.
func FuzzMatch(f *testing.F) {
	prefixes := []string{"/", "/login", "/login/", "/API/v1", "/a;b", "/%6cogin", "/x/../login", "/a%2Fb"}
	for i, s := range seeds {
		f.Add(prefixes[i%len(prefixes)], s)
	}
	f.Fuzz(func(t *testing.T, prefix, path string) {
		pre := httppath.NewPrefix(prefix)
		p, err := httppath.Parse(path)
		got := err == nil && pre.Matches(p)
		if want := refMatches(prefix, path); got != want {
			t.Fatalf("NewPrefix(%q).Matches(%q) = %v, the reference says %v", prefix, path, got, want)
		}
		if err != nil {
			return
		}
		again, err := httppath.Parse(p.String())
		if err != nil || pre.Matches(again) != got {
			t.Fatalf("prefix %q: path %q matches %v, its normalized form %q does not (%v)", prefix, path, got, p.String(), err)
		}
	})
}
