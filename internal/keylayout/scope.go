package keylayout

import (
	"fmt"
	"regexp"
	"strings"
)

// DefaultPrefix is the key prefix of an installation that chooses none: every key of
// namespace ns begins with "{rl:ns/".
const DefaultPrefix = "rl:"

// prefixPattern is what a key prefix may hold: characters that need no escaping in a key,
// are no hash-tag brace, no template "$" and no Redis ACL glob character (* ? [ ] \), so
// that "~{<prefix><namespace>/*" is an exact ACL key pattern. It ends with ':' and holds no
// '/': as namespaces (DNS labels) hold neither, "<prefix><namespace>/" then splits into its
// prefix and namespace in one way only, and no two namespaces share a scope.
var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]*:$`)

// ValidatePrefix refuses a key prefix that cannot scope namespaces apart (see prefixPattern).
func ValidatePrefix(prefix string) error {
	if len(prefix) > 64 || !prefixPattern.MatchString(prefix) {
		return fmt.Errorf("key prefix %q: want at most 64 of [A-Za-z0-9._:-], ending with ':' (such as %q)", prefix, DefaultPrefix)
	}
	return nil
}

// ScopeStart is how every key template of a namespace must begin, for prefix: the hash
// tag's opening brace, the prefix and the namespace followed by '/'. Every key of namespace
// ns then begins with ScopeOf(prefix, ns).
func ScopeStart(prefix string) string { return "{" + prefix + "${" + VarNamespace + "}/" }

// ScopeOf is how every key of namespace ns begins, for prefix: "{rl:shop/". A Redis ACL
// key pattern of ScopeOf(prefix, ns) + "*" grants exactly the namespace's keys.
func ScopeOf(prefix, ns string) string { return "{" + prefix + EncodeValue(ns) + "/" }

// InScope reports, as an error naming the required start, whether every key template t can
// expand to lies in its namespace's scope: t begins with ScopeStart(prefix). Keys that other
// policies of the same namespace use stay possible; keys of another namespace, constant
// keys and keys outside the prefix do not.
func InScope(t *Template, prefix string) error {
	start := ScopeStart(prefix)
	if strings.HasPrefix(t.String(), start) {
		return nil
	}
	return fmt.Errorf("%q must begin with %q: every key of a policy lives under its namespace's prefix, so no policy can name another namespace's keys or keys outside the prefix; for example %q",
		t, start, start+"${"+VarPolicy+"}:${"+VarIdentity+"}}:${"+VarLimit+"}")
}

// NamespaceOf is the namespace whose scope key lies in, for prefix: "shop" for
// "{rl:shop/orders:alice}:per-second". ok is false for a key in no namespace's scope: one
// not beginning with "{<prefix>", or whose text up to the first '/' is no namespace name (a
// DNS label, which EncodeValue leaves as it is). It is ScopeOf's inverse: NamespaceOf(prefix,
// ScopeOf(prefix, ns)+rest) is ns for every namespace ns.
func NamespaceOf(prefix, key string) (ns string, ok bool) {
	rest, ok := strings.CutPrefix(key, "{"+prefix)
	if !ok {
		return "", false
	}
	ns, _, ok = strings.Cut(rest, "/")
	if !ok || !dnsLabel.MatchString(ns) {
		return "", false
	}
	return ns, true
}

// dnsLabel is a Kubernetes namespace name: an RFC 1123 label.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
