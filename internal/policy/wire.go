package policy

import (
	"slices"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// The API's match and identity as the snapshot carries them: field by field, so a change of
// the API's Go types never changes the wire format by itself (testdata/entries-from-api.json
// and internal/snapshot/testdata/wire-v1.json hold both ends).

// wireMatch is m in the wire format.
func wireMatch(m v1alpha1.Match) snapshot.Match {
	out := snapshot.Match{}
	for _, h := range m.HTTP {
		w := snapshot.HTTPMatch{Hosts: slices.Clone(h.Hosts), PathPrefixes: slices.Clone(h.PathPrefixes)}
		for _, method := range h.Methods {
			w.Methods = append(w.Methods, string(method))
		}
		out.HTTP = append(out.HTTP, w)
	}
	if e := m.Envoy; e != nil {
		out.Envoy = &snapshot.EnvoyMatch{Domain: e.Domain}
		for _, d := range e.Descriptors {
			out.Envoy.Descriptors = append(out.Envoy.Descriptors, snapshot.DescriptorMatch{Key: d.Key, Value: d.Value})
		}
	}
	return out
}

// wireIdentity is id in the wire format.
func wireIdentity(id v1alpha1.Identity) snapshot.Identity {
	out := snapshot.Identity{OnMissing: string(id.OnMissing), Sources: wireSources(id.Sources)}
	for _, p := range id.Parts {
		out.Parts = append(out.Parts, snapshot.IdentityPart{Sources: wireSources(p.Sources)})
	}
	return out
}

// wireSources is a chain of identity sources in the wire format; nil for none.
func wireSources(in v1alpha1.IdentitySources) []snapshot.IdentitySource {
	var out []snapshot.IdentitySource
	for _, s := range in {
		out = append(out, wireSource(s))
	}
	return out
}

// wireSource is one identity source in the wire format.
func wireSource(s v1alpha1.IdentitySource) snapshot.IdentitySource {
	out := snapshot.IdentitySource{Type: string(s.Type)}
	if s.Header != nil {
		out.Header = &snapshot.HeaderSource{Name: s.Header.Name}
	}
	if c := s.ClientIP; c != nil {
		out.ClientIP = &snapshot.ClientIPSource{IPv4PrefixLength: c.IPv4PrefixLength, IPv6PrefixLength: c.IPv6PrefixLength,
			TrustedProxies: c.TrustedProxies}
	}
	if j := s.JWTClaim; j != nil {
		out.JWTClaim = &snapshot.JWTClaimSource{Header: j.Header, Claim: j.Claim}
	}
	if s.Descriptor != nil {
		out.Descriptor = &snapshot.DescriptorSource{Key: s.Descriptor.Key}
	}
	if s.Fixed != nil {
		out.Fixed = &snapshot.FixedSource{Value: s.Fixed.Value}
	}
	return out
}
