package requestread

import (
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// View is what the Method and PathPrefix sources read of an HTTP request, beyond its
// headers and peer address: its request line, as the policies were matched on it.
type View struct {
	// Host is the canonical host (CanonicalHost).
	Host string
	// Path is the normalized path.
	Path httppath.Path
	// Sent is the request method as sent, upper-cased (UpperASCII).
	Sent string
	// Overrides are the methods the request asks the upstream to run (MethodOverrides).
	Overrides []string
}

// method is the method the upstream will run: the first override, else the method sent.
func (v *View) method() string {
	if len(v.Overrides) > 0 {
		return v.Overrides[0]
	}
	return v.Sent
}

// Matcher is what the PathPrefix source reads of a policy's HTTP match: the longest path
// prefix of its entries that a request matches. The engine's Rule, which holds the
// compiled match, is one.
type Matcher interface {
	// MatchedPrefix is the longest path prefix, normalized, of the policy's HTTP match
	// entries that match the request v, "/" for a matching entry naming none; "" when no
	// entry matches. v is a copy, so that the caller's View stays on its stack.
	MatchedPrefix(v View) string
}

// HTTPIdentity reads the caller's identity for policy e from an HTTP request's headers and
// peer address: the first source that yields a non-empty value, or with parts their
// combination (composeParts). ok is false when no source does, or with parts when a part
// yields none and onMissing is Reject or Skip. peer is the connection's remote address
// (host:port or host). A header source sent on several field lines is an error
// (ErrRepeatedHeader). The Method and PathPrefix sources read the request line v and, for
// PathPrefix, the policy's match m: with v nil they yield nothing.
func HTTPIdentity(e *snapshot.Entry, h http.Header, peer string, v *View, m Matcher) (id string, ok bool, err error) {
	ident := &e.Identity
	if len(ident.Parts) == 0 {
		i, val, err := httpChain(ident.Sources, h, peer, v, m)
		if err != nil || i < 0 {
			return "", false, err
		}
		return sourced(len(ident.Sources), i, val), true, nil
	}
	var vals [MaxParts]string
	var from [MaxParts]int
	for k := range ident.Parts {
		i, val, err := httpChain(ident.Parts[k].Sources, h, peer, v, m)
		if err != nil {
			return "", false, err
		}
		from[k], vals[k] = i, val
	}
	return composeParts(ident, from[:len(ident.Parts)], vals[:len(ident.Parts)])
}

// httpChain reads a fallback chain of sources: the position of the first that yields a
// value, and the value; -1 when none does.
func httpChain(sources []snapshot.IdentitySource, h http.Header, peer string, v *View, m Matcher) (int, string, error) {
	for i, s := range sources {
		val, err := httpSource(s, h, peer, v, m)
		if err != nil {
			return -1, "", err
		}
		if val != "" {
			return i, val, nil
		}
	}
	return -1, "", nil
}

// DescriptorIdentity reads the caller's identity for policy e from an Envoy descriptor, as
// HTTPIdentity does from an HTTP request.
func DescriptorIdentity(e *snapshot.Entry, entries []DescriptorEntry) (id string, ok bool) {
	ident := &e.Identity
	if len(ident.Parts) == 0 {
		i, val := descriptorChain(ident.Sources, entries)
		if i < 0 {
			return "", false
		}
		return sourced(len(ident.Sources), i, val), true
	}
	var vals [MaxParts]string
	var from [MaxParts]int
	for k := range ident.Parts {
		from[k], vals[k] = descriptorChain(ident.Parts[k].Sources, entries)
	}
	id, ok, _ = composeParts(ident, from[:len(ident.Parts)], vals[:len(ident.Parts)])
	return id, ok
}

// descriptorChain is httpChain on an Envoy descriptor.
func descriptorChain(sources []snapshot.IdentitySource, entries []DescriptorEntry) (int, string) {
	for i, s := range sources {
		if v := descriptorSource(s, entries); v != "" {
			return i, v
		}
	}
	return -1, ""
}

// sourced is the identity of value v read from source i of a chain of n sources
// (snapshot.Sourced).
func sourced(n, i int, v string) string { return snapshot.Sourced(n, i, v) }
