package requestread

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// errNotAHostName says why CanonicalHost refused a host: what it names differs between the
// gateways and upstreams that read it.
var errNotAHostName = errors.New("not a host name: an empty label, or a byte other than a letter, digit, \"-\", \"_\" or \".\"")

// CanonicalHost is the host an authority names (a Host header, Envoy's :authority,
// X-Forwarded-Host, the host of X-Original-URL), as every front matches policies on it: ASCII
// lower case, without the port, without the one trailing dot of an absolute name
// ("API.example.com.:8443" is api.example.com, as nginx and Traefik route it), an IPv6
// literal bracketed in its RFC 5952 form. "" (a request without a host, HTTP/1.0) stays "",
// and matches only the policies that name no host.
//
// An authority that gateways and upstreams read differently is refused, as paths they read
// differently are: an empty label ("api.example.com..", ".api.example.com"), any byte but
// letters, digits, "-", "_" and "." (percent-encoding, "@", "*", a comma, non-ASCII), a
// port that is not digits or a second port ("api.example.com:https",
// "api.example.com:80:80"), a bracketed literal that is not an IPv6 address. Caddy and Go pass such a Host on as sent, and an upstream that trims or decodes it
// would serve a host no policy was matched on.
func CanonicalHost(authority string) (string, error) {
	if authority == "" {
		return "", nil
	}
	host, port, ok := splitAuthority(authority)
	switch {
	case !ok:
		return "", fmt.Errorf("host %q: not host[:port]", authority)
	case strings.Trim(port, "0123456789") != "":
		return "", fmt.Errorf("host %q: the port is not a number", authority)
	}
	if strings.HasPrefix(host, "[") {
		addr, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", fmt.Errorf("host %q: not an IPv6 address in brackets", authority)
		}
		return "[" + addr.String() + "]", nil
	}
	name := strings.TrimSuffix(host, ".")
	if !isHostName(name) {
		return "", fmt.Errorf("host %q: %w", authority, errNotAHostName)
	}
	return strings.ToLower(name), nil
}

// splitAuthority splits host[:port]; a host beginning with "[" runs to its "]". ok is false
// when anything but ":port" follows the "]".
func splitAuthority(authority string) (host, port string, ok bool) {
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", false
		}
		host, rest := authority[:end+1], authority[end+1:]
		if rest == "" {
			return host, "", true
		}
		port, ok = strings.CutPrefix(rest, ":")
		return host, port, ok
	}
	if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		return authority[:i], authority[i+1:], true
	}
	return authority, "", true
}

// isHostName reports whether name is dot-separated non-empty labels of ASCII letters,
// digits, "-" and "_" (DNS names, IPv4 addresses, and the underscores some hosts carry).
func isHostName(name string) bool {
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !isNameByte(label[i]) {
				return false
			}
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
