package attachment

import (
	"fmt"
	"slices"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// rule is one route rule reduced to what a policy can match: path prefixes per method set.
type rule struct {
	name    string // "" when the rule has no name
	matches []v1alpha1.HTTPMatch
	err     error // the rule cannot be expressed as host, path prefix and method
}

// httpRules derives the matches of an HTTPRoute's rules. A rule without matches matches every
// path; an Exact path is governed as a prefix (its sub-paths too); header and query matches
// are not narrowed on (the policy governs a superset of the rule's requests); a regular
// expression cannot be expressed and makes the rule invalid.
func httpRules(rules []gwapiv1.HTTPRouteRule) []rule {
	out := make([]rule, 0, len(rules))
	for i, r := range rules {
		out = append(out, ruleOf(i, r.Name, r.Matches, func(m gwapiv1.HTTPRouteMatch) (string, []v1alpha1.HTTPMethod, error) {
			p, err := httpPath(m.Path)
			return p, httpMethods(m.Method), err
		}))
	}
	return out
}

// ruleOf derives rule i from its matches, each to a path prefix and methods; a rule without
// matches matches every path.
func ruleOf[M any](i int, name *gwapiv1.SectionName, matches []M, derive func(M) (string, []v1alpha1.HTTPMethod, error)) rule {
	if len(matches) == 0 {
		return rule{name: sectionName(name), matches: group([]string{"/"}, [][]v1alpha1.HTTPMethod{nil})}
	}
	prefixes, methods := make([]string, 0, len(matches)), make([][]v1alpha1.HTTPMethod, 0, len(matches))
	for _, m := range matches {
		p, ms, err := derive(m)
		if err != nil {
			return rule{name: sectionName(name), err: fmt.Errorf("rules[%d]: %w", i, err)}
		}
		prefixes, methods = append(prefixes, p), append(methods, ms)
	}
	return rule{name: sectionName(name), matches: group(prefixes, methods)}
}

func httpPath(m *gwapiv1.HTTPPathMatch) (string, error) {
	if m == nil || m.Value == nil {
		return "/", nil
	}
	if m.Type != nil && *m.Type == gwapiv1.PathMatchRegularExpression {
		return "", fmt.Errorf("path %q is a regular expression, which a policy cannot govern: target a rule without one (sectionName) or use match.http", *m.Value)
	}
	return *m.Value, nil
}

func httpMethods(m *gwapiv1.HTTPMethod) []v1alpha1.HTTPMethod {
	if m == nil {
		return nil
	}
	return []v1alpha1.HTTPMethod{v1alpha1.HTTPMethod(*m)}
}

// grpcRules derives the matches of a GRPCRoute's rules: the gRPC path /service/method (or
// /service when only the service is named; every path when neither is).
func grpcRules(rules []gwapiv1.GRPCRouteRule) []rule {
	out := make([]rule, 0, len(rules))
	for i, r := range rules {
		out = append(out, ruleOf(i, r.Name, r.Matches, func(m gwapiv1.GRPCRouteMatch) (string, []v1alpha1.HTTPMethod, error) {
			p, err := grpcPath(m.Method)
			return p, nil, err
		}))
	}
	return out
}

func grpcPath(m *gwapiv1.GRPCMethodMatch) (string, error) {
	if m == nil || m.Service == nil || *m.Service == "" {
		return "/", nil
	}
	if m.Type != nil && *m.Type == gwapiv1.GRPCMethodMatchRegularExpression {
		return "", fmt.Errorf("method match on %q is a regular expression, which a policy cannot govern", *m.Service)
	}
	if m.Method == nil || *m.Method == "" {
		return "/" + *m.Service, nil
	}
	return "/" + *m.Service + "/" + *m.Method, nil
}

// group folds prefixes with the same methods into one match entry each, in first-seen order.
func group(prefixes []string, methods [][]v1alpha1.HTTPMethod) []v1alpha1.HTTPMatch {
	var out []v1alpha1.HTTPMatch
	for i, p := range prefixes {
		j := slices.IndexFunc(out, func(m v1alpha1.HTTPMatch) bool { return slices.Equal(m.Methods, methods[i]) })
		if j < 0 {
			out = append(out, v1alpha1.HTTPMatch{Methods: methods[i]})
			j = len(out) - 1
		}
		if !slices.Contains(out[j].PathPrefixes, p) {
			out[j].PathPrefixes = append(out[j].PathPrefixes, p)
		}
	}
	return out
}

func sectionName(n *gwapiv1.SectionName) string {
	if n == nil {
		return ""
	}
	return string(*n)
}

// withHosts returns the matches with hosts set on each.
func withHosts(matches []v1alpha1.HTTPMatch, hosts []string) []v1alpha1.HTTPMatch {
	out := make([]v1alpha1.HTTPMatch, len(matches))
	for i, m := range matches {
		m.Hosts = hosts
		out[i] = m
	}
	return out
}

// matchKey identifies a match entry, to drop duplicates from a union.
func matchKey(m v1alpha1.HTTPMatch) string {
	ms := make([]string, len(m.Methods))
	for i, x := range m.Methods {
		ms[i] = string(x)
	}
	return strings.Join(m.Hosts, ",") + "|" + strings.Join(m.PathPrefixes, ",") + "|" + strings.Join(ms, ",")
}
