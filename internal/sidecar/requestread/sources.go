package requestread

import (
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// httpSource is the value source s yields for an HTTP request; "" for none.
func httpSource(s snapshot.IdentitySource, h http.Header, peer string, v *View, m Matcher) (string, error) {
	switch s.Type {
	case snapshot.SourceMethod:
		if v != nil {
			return identityMethod(v.method()), nil
		}
		return "", nil
	case snapshot.SourcePathPrefix:
		if v != nil {
			return m.MatchedPrefix(*v), nil
		}
		return "", nil
	}
	return sentSource(s, h, peer)
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

// sentSource is the value a source that reads only the headers and the peer address
// yields; "" for none.
func sentSource(s snapshot.IdentitySource, h http.Header, peer string) (string, error) {
	switch s.Type {
	case snapshot.SourceHeader:
		if s.Header != nil {
			v, _, err := Header(h, s.Header.Name)
			return v, err
		}
	case snapshot.SourceClientIP:
		return clientIP(s.ClientIP, h, peer), nil
	case snapshot.SourceJWTClaim:
		if s.JWTClaim != nil {
			v, _, err := Header(h, headerOr(s.JWTClaim.Header, "Authorization"))
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
