package engine

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Set is one loaded snapshot: its policies compiled and indexed. Immutable; a reload builds a
// new Set and swaps it in, so a request in flight finishes on the Set it started with.
type Set struct {
	// Namespace the policies belong to.
	Namespace string
	// Version is the snapshot's content version.
	Version string
	// Redis is the topology the snapshot names.
	Redis snapshot.Redis
	// Rules are the policies, sorted by name.
	Rules   []*Rule
	byName  map[string]*Rule
	http    []*Rule
	domains map[string][]*Rule
	// refused is how many of the snapshot's policies did not compile.
	refused int
}

// newSet compiles a parsed snapshot, each policy once. Rules of prev whose published form
// is unchanged are reused, so their in-process state (the LocalCap counters) survives the
// reload. A policy that does not compile (a newer controller's feature, a hand-edited
// document) is refused on its own: prev's rule of that name, if any, stays in force, and
// the other policies load. Refused lists every refusal, naming the policy.
func newSet(s *snapshot.Snapshot, prev *Set) (set *Set, refused []error) {
	set = emptySet(s.Namespace)
	set.Version, set.Redis = s.Version, s.Redis
	for _, p := range s.Policies {
		r, err := ruleFor(s, p, prev)
		if err != nil {
			refused = append(refused, err)
			if r = lastGood(s, p.Name, prev); r == nil {
				continue
			}
		}
		if _, dup := set.byName[p.Name]; dup {
			refused = append(refused, fmt.Errorf("policy %q appears twice", p.Name))
			continue
		}
		set.add(r)
	}
	set.refused = len(refused)
	set.sort()
	return set, refused
}

// ruleFor is the rule of policy p of snapshot s: refused when its keys fall outside the
// namespace's scope, else reused from prev or compiled.
func ruleFor(s *snapshot.Snapshot, p snapshot.Entry, prev *Set) (*Rule, error) {
	if err := p.InScope(s.Prefix()); err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	return reuseOrCompile(s.Namespace, s.Redis.Functions, p, prev)
}

// lastGood is prev's rule named name, when it is still in scope for s, or nil.
func lastGood(s *snapshot.Snapshot, name string, prev *Set) *Rule {
	r := prev.sameNamespace(s.Namespace).Rule(name)
	if r == nil || r.Entry.InScope(s.Prefix()) != nil {
		return nil
	}
	return r
}

// sameNamespace is s when it holds namespace's policies, else nil.
func (s *Set) sameNamespace(namespace string) *Set {
	if s == nil || s.Namespace != namespace {
		return nil
	}
	return s
}

// emptySet is a Set of namespace without policies.
func emptySet(namespace string) *Set {
	return &Set{Namespace: namespace, byName: map[string]*Rule{}, domains: map[string][]*Rule{}}
}

func reuseOrCompile(namespace string, functions bool, p snapshot.Entry, prev *Set) (*Rule, error) {
	if prev != nil && prev.Namespace == namespace && prev.Redis.Functions == functions {
		if old := prev.byName[p.Name]; old != nil && old.fingerprint != "" && old.fingerprint == fingerprint(p) {
			return old, nil
		}
	}
	return newRule(namespace, functions, p)
}

func (s *Set) add(r *Rule) {
	s.Rules = append(s.Rules, r)
	s.byName[r.Name()] = r
	if len(r.Entry.Match.HTTP) > 0 {
		s.http = append(s.http, r)
	}
	if m := r.Entry.Match.Envoy; m != nil {
		s.domains[m.Domain] = append(s.domains[m.Domain], r)
	}
}

// sort orders every index by policy name, the order requests are checked in.
func (s *Set) sort() {
	byName := func(rs []*Rule) {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Name() < rs[j].Name() })
	}
	byName(s.Rules)
	byName(s.http)
	for _, rs := range s.domains {
		byName(rs)
	}
}

// Rule returns the rule of the named policy, or nil (also on a nil Set).
func (s *Set) Rule(name string) *Rule {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// Refused is how many of the snapshot's policies did not compile: each is enforced as
// its last good version, or not at all when it never compiled.
func (s *Set) Refused() int { return s.refused }

// fingerprint is the canonical JSON of a published policy.
func fingerprint(p snapshot.Entry) string {
	b, err := json.Marshal(p)
	if err != nil {
		return "" // never equal to a real fingerprint: the rule is recompiled
	}
	return string(b)
}
