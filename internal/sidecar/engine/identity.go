package engine

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/jwtpayload"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// HTTPIdentity reads the caller's identity for r from an HTTP request: the first source that
// yields a non-empty value. ok is false when none does. peer is the connection's remote
// address (host:port or host). A header source sent on several field lines is an error
// (ErrRepeatedHeader).
func (r *Rule) HTTPIdentity(h http.Header, peer string) (id string, ok bool, err error) {
	for i, s := range r.Entry.Identity.Sources {
		v, err := httpSource(s, h, peer)
		if err != nil {
			return "", false, err
		}
		if v != "" {
			return r.sourced(i, v), true, nil
		}
	}
	return "", false, nil
}

// descriptorIdentity reads the caller's identity for r from an Envoy descriptor.
func (r *Rule) descriptorIdentity(entries []DescriptorEntry) (id string, ok bool) {
	for i, s := range r.Entry.Identity.Sources {
		if v := descriptorSource(s, entries); v != "" {
			return r.sourced(i, v), true
		}
	}
	return "", false
}

// sourced is the identity of value v read from source i (snapshot.Identity.Sourced).
func (r *Rule) sourced(i int, v string) string { return r.Entry.Identity.Sourced(i, v) }

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
