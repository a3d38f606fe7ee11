package requestread

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

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
