package sidecar

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// maxJWTBytes bounds the bearer tokens decoded for a claim. Other values need no bound here:
// the key layer hashes long values itself.
const maxJWTBytes = 16 << 10

// HTTPIdentity reads the caller's identity for e from an HTTP request: the first source that
// yields a non-empty value. ok is false when none does. peer is the connection's remote
// address (host:port or host).
func (e *Entry) HTTPIdentity(h http.Header, peer string) (id string, ok bool) {
	for _, s := range e.Spec.Identity.Sources {
		if v := httpSource(s, h, peer); v != "" {
			return v, true
		}
	}
	return "", false
}

// DescriptorIdentity reads the caller's identity for e from an Envoy descriptor.
func (e *Entry) DescriptorIdentity(entries []DescriptorEntry) (id string, ok bool) {
	for _, s := range e.Spec.Identity.Sources {
		if v := descriptorSource(s, entries); v != "" {
			return v, true
		}
	}
	return "", false
}

func httpSource(s v1alpha1.IdentitySource, h http.Header, peer string) string {
	switch s.Type {
	case v1alpha1.IdentityHeader:
		if s.Header != nil {
			return h.Get(s.Header.Name)
		}
	case v1alpha1.IdentityClientIP:
		return clientIP(s.ClientIP, h, peer)
	case v1alpha1.IdentityJWTClaim:
		if s.JWTClaim != nil {
			return jwtClaim(h.Get(headerOr(s.JWTClaim.Header, "Authorization")), s.JWTClaim.Claim)
		}
	case v1alpha1.IdentityFixed:
		if s.Fixed != nil {
			return s.Fixed.Value
		}
	}
	return ""
}

func descriptorSource(s v1alpha1.IdentitySource, entries []DescriptorEntry) string {
	switch s.Type {
	case v1alpha1.IdentityDescriptor:
		if s.Descriptor != nil {
			for _, e := range entries {
				if e.Key == s.Descriptor.Key {
					return e.Value
				}
			}
		}
	case v1alpha1.IdentityFixed:
		if s.Fixed != nil {
			return s.Fixed.Value
		}
	}
	return ""
}

// clientIP is the client address, masked to the configured prefix. With trustedProxies n > 0
// it is the address n hops from the right of X-Forwarded-For (all appended by trusted
// proxies); otherwise the peer address, which a client cannot spoof.
func clientIP(c *v1alpha1.ClientIPSource, h http.Header, peer string) string {
	raw := peerHost(peer)
	if c != nil && c.TrustedProxies > 0 {
		if hops := forwardedFor(h); len(hops) > 0 {
			raw = hops[max(len(hops)-int(c.TrustedProxies), 0)]
		}
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(raw))
	if err != nil {
		return ""
	}
	return maskAddr(addr.Unmap().WithZone(""), c).String()
}

func maskAddr(a netip.Addr, c *v1alpha1.ClientIPSource) netip.Addr {
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

// forwardedFor lists X-Forwarded-For hops, left to right, across repeated headers.
func forwardedFor(h http.Header) []string {
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

func peerHost(peer string) string {
	if h, _, err := net.SplitHostPort(peer); err == nil {
		return h
	}
	return peer
}

// jwtClaim decodes (without verifying: the gateway in front verified it) the payload of a
// "Bearer <jwt>" value and returns a string or number claim; dots walk nested objects.
func jwtClaim(authz, claim string) string {
	token, ok := strings.CutPrefix(authz, "Bearer ")
	if !ok || len(token) > maxJWTBytes {
		return ""
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber() // a numeric id keeps every digit
	if dec.Decode(&v) != nil {
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
