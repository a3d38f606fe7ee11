package engine

import (
	"net/http"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// MatchHTTP returns the rules governing an HTTP request, in name order. host is the
// request's host as sent, read by canonicalHost (a host it refuses matches only the policies
// naming no host; PlanHTTP refuses such a request instead). path is the request's normalized
// path (httppath.ParseTarget); method is the request method as sent, and overrides the
// methods the request asks the upstream to run instead (methodOverrides): a policy selecting
// any of them governs the request.
func (s *Set) MatchHTTP(host string, path httppath.Path, method string, overrides ...string) []*Rule {
	canonical, err := canonicalHost(host)
	if err != nil {
		canonical = ""
	}
	return s.matchHTTP(canonical, path, method, overrides)
}

// matchHTTP is MatchHTTP on a host canonicalHost gave.
func (s *Set) matchHTTP(host string, path httppath.Path, method string, overrides []string) []*Rule {
	methods := append([]string{upperASCII(method)}, overrides...)
	var out []*Rule
	for _, r := range s.http {
		if r.matchesHTTP(host, path, methods) {
			out = append(out, r)
		}
	}
	return out
}

// methodOverrideHeaders are the headers frameworks (Rails, Laravel, Spring's
// HiddenHttpMethodFilter behind a proxy, Express method-override, ASP.NET) read to run
// another method's handler for a POST.
var methodOverrideHeaders = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// methodOverrides are the methods h asks the upstream to run instead of the one sent,
// upper-cased: a POST with X-HTTP-Method-Override: DELETE runs the DELETE handler on many
// frameworks, so a DELETE policy must govern it. A header sent twice is ErrRepeatedHeader.
func methodOverrides(h http.Header) ([]string, error) {
	var out []string
	for _, name := range methodOverrideHeaders {
		v, ok, err := readHeader(h, name)
		if err != nil {
			return nil, err
		}
		if ok && v != "" {
			out = append(out, upperASCII(strings.TrimSpace(v)))
		}
	}
	return out, nil
}

// MatchDescriptor returns the rules of domain whose descriptor entries are all present in
// entries, in name order.
func (s *Set) MatchDescriptor(domain string, entries []DescriptorEntry) []*Rule {
	var out []*Rule
	for _, r := range s.domains[domain] {
		if descriptorMatches(r.Entry.Match.Envoy.Descriptors, entries) {
			out = append(out, r)
		}
	}
	return out
}

// DescriptorEntry is one key/value entry of an Envoy rate limit descriptor.
type DescriptorEntry struct {
	// Key is the entry's key.
	Key string
	// Value is the entry's value.
	Value string
}

func (r *Rule) matchesHTTP(host string, path httppath.Path, methods []string) bool {
	for i, m := range r.Entry.Match.HTTP {
		if hostMatches(r.hosts[i], host) && pathMatches(r.prefixes[i], path) && anyMethodMatches(m.Methods, methods) {
			return true
		}
	}
	return false
}

// anyMethodMatches reports whether a policy's methods select any of the request's methods.
func anyMethodMatches(selected []string, methods []string) bool {
	for _, m := range methods {
		if methodMatches(selected, m) {
			return true
		}
	}
	return false
}

// hostMatches compares a host canonicalHost gave to patterns; "*.x" matches subdomains of x.
func hostMatches(patterns []string, host string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if p == host || strings.HasPrefix(p, "*.") && strings.HasSuffix(host, p[1:]) && len(host) > len(p)-1 {
			return true
		}
	}
	return false
}

// pathMatches matches whole segments, as httppath.Prefix does; no prefix matches every path.
func pathMatches(prefixes []httppath.Prefix, path httppath.Path) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if p.Matches(path) {
			return true
		}
	}
	return false
}

func compilePrefixes(in []string) []httppath.Prefix {
	out := make([]httppath.Prefix, len(in))
	for i, p := range in {
		out[i] = httppath.NewPrefix(p)
	}
	return out
}

// methodMatches compares an upper-cased method to a policy's methods. GET also selects HEAD:
// servers answer HEAD by running the GET handler (Go's ServeMux, Spring, Express, Rails,
// nginx), so HEAD does the same work.
func methodMatches(methods []string, method string) bool {
	if len(methods) == 0 {
		return true
	}
	for _, m := range methods {
		if m == method || m == "GET" && method == "HEAD" {
			return true
		}
	}
	return false
}

func descriptorMatches(want []snapshot.DescriptorMatch, entries []DescriptorEntry) bool {
	for _, w := range want {
		if !hasEntry(entries, w) {
			return false
		}
	}
	return true
}

func hasEntry(entries []DescriptorEntry, w snapshot.DescriptorMatch) bool {
	for _, e := range entries {
		if e.Key == w.Key && (w.Value == "" || e.Value == w.Value) {
			return true
		}
	}
	return false
}

func lowerAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.ToLower(s)
	}
	return out
}

// upperASCII upper-cases ASCII letters only: methods are tokens, and an upstream that reads
// them case-insensitively serves "post" as POST.
func upperASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'a' <= b[j] && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
