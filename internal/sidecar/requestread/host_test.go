package requestread_test

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// Every spelling of one name is that name; a host gateways and upstreams read differently is
// refused.
func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "",
		"api.example.com":            "api.example.com",
		"API.Example.COM":            "api.example.com",
		"api.example.com.":           "api.example.com",
		"api.example.com:8443":       "api.example.com",
		"Api.Example.Com.:80":        "api.example.com",
		"api.example.com:":           "api.example.com",
		"10.0.0.7":                   "10.0.0.7",
		"10.0.0.7:80":                "10.0.0.7",
		"[::1]":                      "[::1]",
		"[::1]:80":                   "[::1]",
		"[0:0::0001]":                "[::1]",
		"[2001:DB8::A]:443":          "[2001:db8::a]",
		"xn--pi-7kc.example.com":     "xn--pi-7kc.example.com",
		"_acme.internal_host.local":  "_acme.internal_host.local",
		"localhost":                  "localhost",
		"shop-1.eu-west.example.com": "shop-1.eu-west.example.com",
	} {
		if got, err := requestread.CanonicalHost(in); err != nil || got != want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"api.example.com..", ".api.example.com", "api..example.com", ".", "..", ":80",
		"api.example.com:80:80", "api.example.com:abc", "api.example.com:-1",
		"api%2eexample.com", "api.ex%61mple.com", "u@api.example.com", "*.example.com",
		"api.example.com,other.example", "api.example.com other", "api.example.com/x", "api.example.com\\x",
		"\xd0\xb0pi.example.com", "api.example.co\u212a", "api.example.com\x00",
		"[::1", "[::1]x", "[]", "[10.0.0.7]", "[fe80::1%25eth0]", "[v1.x]", "::1",
	} {
		if got, err := requestread.CanonicalHost(in); err == nil {
			t.Errorf("CanonicalHost(%q) = %q, want an error", in, got)
		}
	}
}
