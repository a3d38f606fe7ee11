package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/jwtpayload"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httppath"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// HTTPIdentity reads the caller's identity for r from an HTTP request's headers and peer
// address: the first source that yields a non-empty value, or with parts their combination
// (composeParts). ok is false when no source does, or with parts when a part yields none and
// onMissing is Reject or Skip. peer is the connection's remote address (host:port or
// host). A header source sent on several field lines is an error (ErrRepeatedHeader). The
// Method and PathPrefix sources yield nothing here: they need the whole request, which
// PlanHTTP has.
func (r *Rule) HTTPIdentity(h http.Header, peer string) (id string, ok bool, err error) {
	return r.httpIdentity(h, peer, nil)
}

// httpView is what the Method and PathPrefix sources read of an HTTP request, beyond its
// headers and peer address.
type httpView struct {
	// host is the canonical host (canonicalHost).
	host string
	// path is the normalized path.
	path httppath.Path
	// sent is the request method as sent, upper-cased.
	sent string
	// overrides are the methods the request asks the upstream to run (methodOverrides).
	overrides []string
}

// method is the method the upstream will run: the first override, else the method sent.
func (v *httpView) method() string {
	if len(v.overrides) > 0 {
		return v.overrides[0]
	}
	return v.sent
}

// httpIdentity is HTTPIdentity with the request view v (nil: none, so Method and
// PathPrefix yield nothing).
func (r *Rule) httpIdentity(h http.Header, peer string, v *httpView) (string, bool, error) {
	id := &r.Entry.Identity
	if len(id.Parts) == 0 {
		i, val, err := r.httpChain(id.Sources, h, peer, v)
		if err != nil || i < 0 {
			return "", false, err
		}
		return sourced(len(id.Sources), i, val), true, nil
	}
	var vals [maxParts]string
	var from [maxParts]int
	for k := range id.Parts {
		i, val, err := r.httpChain(id.Parts[k].Sources, h, peer, v)
		if err != nil {
			return "", false, err
		}
		from[k], vals[k] = i, val
	}
	return r.composeParts(from[:len(id.Parts)], vals[:len(id.Parts)])
}

// httpChain reads a fallback chain of sources: the position of the first that yields a
// value, and the value; -1 when none does.
func (r *Rule) httpChain(sources []snapshot.IdentitySource, h http.Header, peer string, v *httpView) (int, string, error) {
	for i, s := range sources {
		val, err := r.httpSource(s, h, peer, v)
		if err != nil {
			return -1, "", err
		}
		if val != "" {
			return i, val, nil
		}
	}
	return -1, "", nil
}

// descriptorIdentity reads the caller's identity for r from an Envoy descriptor, as
// HTTPIdentity does from an HTTP request.
func (r *Rule) descriptorIdentity(entries []DescriptorEntry) (id string, ok bool) {
	ident := &r.Entry.Identity
	if len(ident.Parts) == 0 {
		i, val := descriptorChain(ident.Sources, entries)
		if i < 0 {
			return "", false
		}
		return sourced(len(ident.Sources), i, val), true
	}
	var vals [maxParts]string
	var from [maxParts]int
	for k := range ident.Parts {
		from[k], vals[k] = descriptorChain(ident.Parts[k].Sources, entries)
	}
	id, ok, _ = r.composeParts(from[:len(ident.Parts)], vals[:len(ident.Parts)])
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

// maxParts is the most parts a composite identity has (the API's bound); a snapshot with
// more is refused when it is loaded (newRule).
const maxParts = 4

// missingPart stands for a part that yielded no value, under onMissing Shared: a token no
// value's token can be, since those begin with a digit.
const missingPart = '-'

// composeParts is the identity of a composite: each part's value (sourced within its chain:
// from[k] is the source's position, -1 for none, statedPart for a value stated whole)
// written as its length in decimal, '.' and the value, or missingPart, the parts joined by
// '+' ("5.key-1+4./api" for key-1 on /api). Each
// token says where it ends, so the encoding is injective: no value of one part, whatever
// separators it holds, can make another combination's identity. A missing part makes the
// request have no identity under onMissing Reject and Skip; under Shared it is missingPart,
// one shared value of its own, and the other parts still count apart.
func (r *Rule) composeParts(from []int, vals []string) (string, bool, error) {
	var buf [128]byte
	b := buf[:0]
	for k, i := range from {
		if k > 0 {
			b = append(b, '+')
		}
		if i == -1 {
			if m := r.Entry.Identity.OnMissing; m == snapshot.MissingReject || m == snapshot.MissingSkip {
				return "", false, nil
			}
			b = append(b, missingPart)
			continue
		}
		n := len(vals[k])
		if i != statedPart && len(r.Entry.Identity.Parts[k].Sources) > 1 {
			n += len(strconv.Itoa(i)) + 1
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, '.')
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, '=')
		} else {
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, '.')
		}
		b = append(b, vals[k]...)
	}
	return string(b), true, nil
}

// statedPart stands, in composeParts' from, for a value stated whole by the caller (the
// check API), already as its part yields it.
const statedPart = -2

// ErrNotComposite and ErrPartCount refuse a check API request whose stated parts do not fit
// its policy's identity.
var (
	ErrNotComposite = errors.New("the policy's identity has no parts: state the identity")
	ErrPartCount    = errors.New("state one value per part of the policy's identity, in order (empty for a missing part)")
)

// StatedParts is the identity of a composite whose part values a trusted caller states (the
// check API), each as its part yields it (a part of several sources: the source's position,
// '=' and the value), "" for a missing part: the identity an HTTP request or an Envoy
// descriptor with those values has, so every front spends the same counters. ok is false
// when a part is missing and onMissing is Reject or Skip.
func (r *Rule) StatedParts(values []string) (id string, ok bool, err error) {
	n := len(r.Entry.Identity.Parts)
	switch {
	case n == 0:
		return "", false, ErrNotComposite
	case len(values) != n:
		return "", false, fmt.Errorf("%d values for %d parts: %w", len(values), n, ErrPartCount)
	}
	var from [maxParts]int
	for k, v := range values {
		from[k] = statedPart
		if v == "" {
			from[k] = -1
		}
	}
	return r.composeParts(from[:n], values)
}

// httpSource is the value source s yields for an HTTP request; "" for none.
func (r *Rule) httpSource(s snapshot.IdentitySource, h http.Header, peer string, v *httpView) (string, error) {
	switch s.Type {
	case snapshot.SourceMethod:
		if v != nil {
			return identityMethod(v.method()), nil
		}
		return "", nil
	case snapshot.SourcePathPrefix:
		if v != nil {
			return r.matchedPrefix(v), nil
		}
		return "", nil
	}
	return httpSource(s, h, peer)
}

// identityMethod is the Method source's value of the method the upstream will run
// (upper-cased): HEAD reads as GET (the GET handler serves it), and a method outside the
// standard nine as OTHER, so a caller cannot make counters without bound by inventing
// methods.
func identityMethod(m string) string {
	switch m {
	case http.MethodHead:
		return http.MethodGet
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// matchedPrefix is the PathPrefix source's value: the longest path prefix, normalized, of
// r's HTTP match entries that match the request, "/" for a matching entry naming none; ""
// when no entry matches (a request r does not govern).
func (r *Rule) matchedPrefix(v *httpView) string {
	best, found := "", false
	for i, m := range r.Entry.Match.HTTP {
		if !hostMatches(r.hosts[i], v.host) || !methodMatches(m.Methods, v.sent) && !anyMethodMatches(m.Methods, v.overrides) {
			continue
		}
		if len(r.prefixes[i]) == 0 {
			if !found {
				best, found = "/", true
			}
			continue
		}
		for _, p := range r.prefixes[i] {
			if p.Matches(v.path) && (!found || len(p.String()) > len(best)) {
				best, found = p.String(), true
			}
		}
	}
	return best
}

func httpSource(s snapshot.IdentitySource, h http.Header, peer string) (string, error) {
	switch s.Type {
	case snapshot.SourceHeader:
		if s.Header != nil {
			v, _, err := readHeader(h, s.Header.Name)
			return v, err
		}
	case snapshot.SourceClientIP:
		return clientIP(s.ClientIP, h, peer), nil
	case snapshot.SourceJWTClaim:
		if s.JWTClaim != nil {
			v, _, err := readHeader(h, headerOr(s.JWTClaim.Header, "Authorization"))
			return jwtClaim(v, s.JWTClaim.Claim), err
		}
	case snapshot.SourceFixed:
		if s.Fixed != nil {
			return s.Fixed.Value, nil
		}
	}
	return "", nil
}

func descriptorSource(s snapshot.IdentitySource, entries []DescriptorEntry) string {
	switch s.Type {
	case snapshot.SourceDescriptor:
		if s.Descriptor != nil {
			for _, e := range entries {
				if e.Key == s.Descriptor.Key {
					return e.Value
				}
			}
		}
	case snapshot.SourceFixed:
		if s.Fixed != nil {
			return s.Fixed.Value
		}
	}
	return ""
}

// clientIP is the client address, masked to the configured prefix. With trustedProxies n > 0
// it is the address n hops from the right of X-Forwarded-For, which the first of the n
// trusted proxies appended. A shorter chain did not come through all of them, so its
// leftmost entries are the caller's own writing: the peer address is used instead, as it is
// when that hop is not an address. Without trusted proxies it is the peer address, which a
// client cannot spoof.
func clientIP(c *snapshot.ClientIPSource, h http.Header, peer string) string {
	addr, ok := parseHop(peer)
	if c != nil && c.TrustedProxies > 0 {
		if hops := ForwardedFor(h); len(hops) >= int(c.TrustedProxies) {
			if a, hopOK := parseHop(hops[len(hops)-int(c.TrustedProxies)]); hopOK {
				addr, ok = a, true
			}
		}
	}
	if !ok {
		return ""
	}
	return maskAddr(addr.Unmap().WithZone(""), c).String()
}

// parseHop reads an address written as "a.b.c.d", "v6", "[v6]" or either with a ":port" (some
// proxies append the port to X-Forwarded-For).
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return a, err == nil
}

func maskAddr(a netip.Addr, c *snapshot.ClientIPSource) netip.Addr {
	bits := a.BitLen()
	if c != nil {
		if a.Is4() && c.IPv4PrefixLength > 0 {
			bits = int(c.IPv4PrefixLength)
		} else if a.Is6() && c.IPv6PrefixLength > 0 {
			bits = int(c.IPv6PrefixLength)
		}
	}
	p, err := a.Prefix(min(bits, a.BitLen()))
	if err != nil {
		return a
	}
	return p.Addr()
}

// ForwardedFor lists X-Forwarded-For hops, left to right, across repeated field lines.
func ForwardedFor(h http.Header) []string {
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		for _, hop := range strings.Split(v, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	return hops
}

// jwtClaim is a string or number claim of the "Bearer <jwt>" credential authz (decoded,
// not verified: the gateway in front verified it); dots walk nested objects.
func jwtClaim(authz, claim string) string {
	v, ok := jwtpayload.Decode(authz)
	if !ok {
		return ""
	}
	for _, k := range strings.Split(claim, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	return scalar(v)
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

func headerOr(h, def string) string {
	if h == "" {
		return def
	}
	return h
}
