package keylayout_test

import (
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

func TestInScope(t *testing.T) {
	in := []string{
		"{rl:${namespace}/${policy}:${identity}}:${limit}",
		"{rl:${namespace}/shared:${identity}}:${limit}",
		"{rl:${namespace}/${policy}:${identity}}:idem:${requestId}",
		"{rl:${namespace}/}:${identity}:${limit}",
	}
	out := []string{
		"{rl:victim/payments:${identity}}:${limit}", // another namespace's keys
		"app:session:${identity}",                   // an application's own keys
		"{rl:${identity}}:${limit}",                 // no namespace
		"{${identity}}:${limit}",
		"{rl:${namespace}:${identity}}:${limit}", // "rl:a:..." of namespace a is "rl:" + "a:" of another prefix's scope
		"x{rl:${namespace}/${policy}}:${limit}",  // does not begin with the scope: an ACL pattern would miss it
		"{rl:${namespace}${policy}/x}:${limit}",
		"{other:${namespace}/${policy}}:${limit}",
	}
	for _, s := range in {
		if err := keylayout.InScope(keylayout.MustParse(s), "rl:"); err != nil {
			t.Errorf("%s: %v, want in scope", s, err)
		}
	}
	for _, s := range out {
		err := keylayout.InScope(keylayout.MustParse(s), "rl:")
		if err == nil || !strings.Contains(err.Error(), `must begin with "{rl:${namespace}/"`) {
			t.Errorf("%s: %v, want refused naming the required start", s, err)
		}
	}
}

// TestScopesNeverOverlap: for valid prefixes, the scopes of two (prefix, namespace) pairs
// are never one the start of the other, so no key lies in two scopes.
func TestScopesNeverOverlap(t *testing.T) {
	prefixes := []string{"rl:", "rl:a:", "a:", "rl:rl:", "x.y-z:", ":"}
	namespaces := []string{"a", "ab", "rl", "b", "a-b", "shop"}
	for _, p1 := range prefixes {
		if err := keylayout.ValidatePrefix(p1); err != nil {
			t.Fatalf("prefix %q: %v", p1, err)
		}
		for _, p2 := range prefixes {
			for _, n1 := range namespaces {
				for _, n2 := range namespaces {
					s1, s2 := keylayout.ScopeOf(p1, n1), keylayout.ScopeOf(p2, n2)
					if (p1 != p2 || n1 != n2) && (strings.HasPrefix(s1, s2) || strings.HasPrefix(s2, s1)) {
						t.Errorf("scopes %q (%q, %q) and %q (%q, %q) overlap", s1, p1, n1, s2, p2, n2)
					}
				}
			}
		}
	}
	for _, bad := range []string{"", "rl", "rl/", "r*:", "{rl:", "rl :", "a/b:", "r?:", "r[1]:"} {
		if keylayout.ValidatePrefix(bad) == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
}

// TestNamespaceOf: a key is attributed to the namespace whose scope it begins with, and to
// none when it begins with no scope.
func TestNamespaceOf(t *testing.T) {
	for key, want := range map[string]string{
		"{rl:shop/orders:alice}:per-second": "shop",
		"{rl:shop/}":                        "shop",
		"{rl:a-b/x":                         "a-b",
		keylayout.ScopeOf("rl:", "bank") + "anything": "bank",
	} {
		if got, ok := keylayout.NamespaceOf("rl:", key); !ok || got != want {
			t.Errorf("NamespaceOf(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	for _, key := range []string{"app:session:1", "{rl:shop", "rl:shop/x", "{rl:Shop/x", "{rl:-a/x", "{rl:/x",
		"{rl:a%2Fb/x", "{other:shop/x", "{rl:" + strings.Repeat("a", 64) + "/x"} {
		if ns, ok := keylayout.NamespaceOf("rl:", key); ok {
			t.Errorf("NamespaceOf(%q) = %q; want no namespace", key, ns)
		}
	}
	if ns, ok := keylayout.NamespaceOf("x.y:", "{x.y:shop/k"); !ok || ns != "shop" {
		t.Errorf("prefix x.y:: %q, %v", ns, ok)
	}
}
