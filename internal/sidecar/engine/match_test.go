package engine_test

import (
	"slices"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

func TestMatchHTTP(t *testing.T) {
	set := sidecartest.Set(t,
		sidecartest.Policy("api", 5),
		sidecartest.Policy("shop", 5, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{"Shop.Example.com", "*.shop.io"}, Methods: []v1alpha1.HTTPMethod{"POST"}}}
		}),
		sidecartest.Policy("all", 5, func(s *v1alpha1.RateLimitPolicySpec) { s.Match.HTTP = []v1alpha1.HTTPMatch{{}} }),
		sidecartest.Policy("envoy-only", 5, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match = v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: "edge"}}
		}),
	)
	for _, tc := range []struct {
		host, path, method string
		want               []string
	}{
		{"x", "/api/api", "GET", []string{"all", "api"}},
		{"x", "/api/api/orders", "GET", []string{"all", "api"}},
		{"x", "/api/apix", "GET", []string{"all"}},
		{"x", "/api", "GET", []string{"all"}},
		{"shop.example.com:8443", "/", "POST", []string{"all", "shop"}},
		{"SHOP.EXAMPLE.COM.", "/", "POST", []string{"all", "shop"}},
		{"shop.example.com", "/", "GET", []string{"all"}},
		{"a.b.shop.io", "/", "POST", []string{"all", "shop"}},
		{"shop.io", "/", "POST", []string{"all"}},
		{"evilshop.io", "/", "POST", []string{"all"}},
		{"x", "/API/Api/", "GET", []string{"all", "api"}},
		{"x", "/api/x/../api;v=1/./orders", "GET", []string{"all", "api"}},
		{"x", "/api/%61pi", "GET", []string{"all", "api"}},
		{"shop.example.com", "/", "post", []string{"all", "shop"}},
		{"shop.example.com", "/", "HEAD", []string{"all"}},
	} {
		if got := names(set.MatchHTTP(tc.host, mustPath(t, tc.path), tc.method)); !slices.Equal(got, tc.want) {
			t.Errorf("MatchHTTP(%q, %q, %q) = %v, want %v", tc.host, tc.path, tc.method, got, tc.want)
		}
	}
}

func TestMatchDescriptor(t *testing.T) {
	envoy := func(domain string, d ...v1alpha1.DescriptorMatch) func(*v1alpha1.RateLimitPolicySpec) {
		return func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match = v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: domain, Descriptors: d}}
			s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "remote_address"}}}
		}
	}
	set := sidecartest.Set(t,
		sidecartest.Policy("any-path", 5, envoy("edge", v1alpha1.DescriptorMatch{Key: "path"})),
		sidecartest.Policy("login", 5, envoy("edge", v1alpha1.DescriptorMatch{Key: "path", Value: "/login"})),
		sidecartest.Policy("whole-domain", 5, envoy("edge")),
		sidecartest.Policy("other", 5, envoy("internal")),
	)
	entries := func(kv ...string) []requestread.DescriptorEntry {
		var out []requestread.DescriptorEntry
		for i := 0; i < len(kv); i += 2 {
			out = append(out, requestread.DescriptorEntry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		domain  string
		entries []requestread.DescriptorEntry
		want    []string
	}{
		{"edge", entries("remote_address", "1.2.3.4", "path", "/login"), []string{"any-path", "login", "whole-domain"}},
		{"edge", entries("path", "/cart"), []string{"any-path", "whole-domain"}},
		{"edge", entries("remote_address", "1.2.3.4"), []string{"whole-domain"}},
		{"internal", nil, []string{"other"}},
		{"nope", entries("path", "/login"), []string{}},
	} {
		if got := names(set.MatchDescriptor(tc.domain, tc.entries)); !slices.Equal(got, tc.want) {
			t.Errorf("MatchDescriptor(%q, %v) = %v, want %v", tc.domain, tc.entries, got, tc.want)
		}
	}
	// A policy of domain edge governs any of its descriptors; no policy uses domain nope.
	if len(set.MatchDescriptor("edge", nil)) == 0 || len(set.MatchDescriptor("nope", nil)) != 0 {
		t.Error("domains: edge must be known, nope unknown")
	}
}
