package engine

import (
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// MatchHTTP returns the rules governing an HTTP request, in name order. host is the
// request's host as sent, read by requestread.CanonicalHost (a host it refuses matches only
// the policies naming no host; PlanHTTP refuses such a request instead). path is the
// request's normalized path (httppath.ParseTarget); method is the request method as sent,
// and overrides the methods the request asks the upstream to run instead
// (requestread.MethodOverrides): a policy selecting any of them governs the request.
func (s *Set) MatchHTTP(host string, path httppath.Path, method string, overrides ...string) []*Rule {
	canonical, err := requestread.CanonicalHost(host)
	if err != nil {
		canonical = ""
	}
	return s.matchHTTP(canonical, path, method, overrides)
}

// matchHTTP is MatchHTTP on a host requestread.CanonicalHost gave.
func (s *Set) matchHTTP(host string, path httppath.Path, method string, overrides []string) []*Rule {
	methods := append([]string{requestread.UpperASCII(method)}, overrides...)
	var out []*Rule
	for _, r := range s.http {
		if r.matchesHTTP(host, path, methods) {
			out = append(out, r)
		}
	}
	return out
}

// MatchDescriptor returns the rules of domain whose descriptor entries are all present in
// entries, in name order.
func (s *Set) MatchDescriptor(domain string, entries []requestread.DescriptorEntry) []*Rule {
	var out []*Rule
	for _, r := range s.domains[domain] {
		if descriptorMatches(r.Entry.Match.Envoy.Descriptors, entries) {
			out = append(out, r)
		}
	}
	return out
}

func (r *Rule) matchesHTTP(host string, path httppath.Path, methods []string) bool {
	for i, m := range r.Entry.Match.HTTP {
		if hostMatches(r.hosts[i], host) && pathMatches(r.prefixes[i], path) && anyMethodMatches(m.Methods, methods) {
			return true
		}
	}
	return false
}

// MatchedPrefix is the PathPrefix source's value (requestread.Matcher): the longest path
// prefix, normalized, of r's HTTP match entries that match the request v, "/" for a
// matching entry naming none; "" when no entry matches (a request r does not govern).
func (r *Rule) MatchedPrefix(v requestread.View) string {
	best, found := "", false
	for i, m := range r.Entry.Match.HTTP {
		if !hostMatches(r.hosts[i], v.Host) || !methodMatches(m.Methods, v.Sent) && !anyMethodMatches(m.Methods, v.Overrides) {
			continue
		}
		if len(r.prefixes[i]) == 0 {
			if !found {
				best, found = "/", true
			}
			continue
		}
		for _, p := range r.prefixes[i] {
			if p.Matches(v.Path) && (!found || len(p.String()) > len(best)) {
				best, found = p.String(), true
			}
		}
	}
	return best
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

// hostMatches compares a host requestread.CanonicalHost gave to patterns; "*.x" matches subdomains of x.
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

func descriptorMatches(want []snapshot.DescriptorMatch, entries []requestread.DescriptorEntry) bool {
	for _, w := range want {
		if !hasEntry(entries, w) {
			return false
		}
	}
	return true
}

func hasEntry(entries []requestread.DescriptorEntry, w snapshot.DescriptorMatch) bool {
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
