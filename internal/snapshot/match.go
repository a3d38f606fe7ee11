package snapshot

// The wire form of what a policy matches and whom it counts. These mirror the API's Match
// and Identity field for field, with their own JSON names, so that the API can change its
// Go types without changing what sidecars read: internal/policy converts one into the
// other, in one place, and testdata/wire-v1.json holds the bytes.

// Match selects the requests a policy governs.
type Match struct {
	// HTTP are alternatives for the HTTP fronts: a request matching any entry is governed.
	HTTP []HTTPMatch `json:"http,omitempty"`
	// Envoy selects Envoy RLS requests by domain and descriptor entries.
	Envoy *EnvoyMatch `json:"envoy,omitempty"`
}

// HTTPMatch is one alternative of an HTTP match; every field set must match.
type HTTPMatch struct {
	// Hosts are host names, "*." wildcards of one label; empty matches any host.
	Hosts []string `json:"hosts,omitempty"`
	// PathPrefixes are path prefixes matched on whole segments; empty matches any path.
	PathPrefixes []string `json:"pathPrefixes,omitempty"`
	// Methods are upper-case HTTP methods; empty matches any.
	Methods []string `json:"methods,omitempty"`
}

// EnvoyMatch selects Envoy RLS requests.
type EnvoyMatch struct {
	// Domain is the RLS domain.
	Domain string `json:"domain"`
	// Descriptors are entries a descriptor must hold.
	Descriptors []DescriptorMatch `json:"descriptors,omitempty"`
}

// DescriptorMatch is one descriptor entry: its key and, when set, its value.
type DescriptorMatch struct {
	// Key of the entry.
	Key string `json:"key"`
	// Value of the entry; empty matches any value.
	Value string `json:"value,omitempty"`
}

// Identity says who the caller is: the first of Sources present names it, or, for a
// composite identity, the combination of its Parts' values. Exactly one of Sources and
// Parts is set. A snapshot with Parts is refused by sidecars built before them (its
// content hash differs), which keep their last good snapshot: roll the sidecars first.
type Identity struct {
	// Sources are tried in order.
	Sources []IdentitySource `json:"sources,omitempty"`
	// Parts are the parts of a composite identity, in order: one counter per combination.
	Parts []IdentityPart `json:"parts,omitempty"`
	// OnMissing is what happens when no source is present, or with Parts when a part has
	// none (MissingShared, MissingReject, MissingSkip); empty is MissingShared.
	OnMissing string `json:"onMissing,omitempty"`
}

// IdentityPart is one part of a composite identity: the first of its sources present
// names the part's value.
type IdentityPart struct {
	// Sources are tried in order.
	Sources []IdentitySource `json:"sources"`
}

// What a request with no identity gets (Identity.OnMissing).
const (
	// MissingShared counts every such request under one shared identity.
	MissingShared = "Shared"
	// MissingReject refuses the request.
	MissingReject = "Reject"
	// MissingSkip lets the request through unlimited by this policy.
	MissingSkip = "Skip"
)

// The kinds of identity source (IdentitySource.Type).
const (
	// SourceHeader reads a request header.
	SourceHeader = "Header"
	// SourceClientIP takes the client address, masked to a prefix.
	SourceClientIP = "ClientIP"
	// SourceJWTClaim decodes a claim of a bearer token.
	SourceJWTClaim = "JWTClaim"
	// SourceDescriptor takes an Envoy descriptor entry.
	SourceDescriptor = "Descriptor"
	// SourceFixed is one value for every caller.
	SourceFixed = "Fixed"
	// SourceMethod is the method the upstream will run (HTTP fronts only).
	SourceMethod = "Method"
	// SourcePathPrefix is the path prefix of the policy's HTTP match entry that matched
	// (HTTP fronts only).
	SourcePathPrefix = "PathPrefix"
)

// IdentitySource is one source; the field of its Type is set.
type IdentitySource struct {
	// Type is the kind of source.
	Type string `json:"type"`
	// Header names the header of a SourceHeader.
	Header *HeaderSource `json:"header,omitempty"`
	// ClientIP says how to read a SourceClientIP.
	ClientIP *ClientIPSource `json:"clientIP,omitempty"`
	// JWTClaim says which claim of which token a SourceJWTClaim reads.
	JWTClaim *JWTClaimSource `json:"jwtClaim,omitempty"`
	// Descriptor names the entry of a SourceDescriptor.
	Descriptor *DescriptorSource `json:"descriptor,omitempty"`
	// Fixed is the value of a SourceFixed.
	Fixed *FixedSource `json:"fixed,omitempty"`
}

// HeaderSource is a request header.
type HeaderSource struct {
	// Name of the header.
	Name string `json:"name"`
}

// ClientIPSource is the client address, masked.
type ClientIPSource struct {
	// IPv4PrefixLength keeps this many bits of an IPv4 address; 0 keeps 32.
	IPv4PrefixLength int32 `json:"ipv4PrefixLength,omitempty"`
	// IPv6PrefixLength keeps this many bits of an IPv6 address; 0 keeps 128.
	IPv6PrefixLength int32 `json:"ipv6PrefixLength,omitempty"`
	// TrustedProxies is how many X-Forwarded-For hops from the right are proxies.
	TrustedProxies int32 `json:"trustedProxies,omitempty"`
}

// JWTClaimSource is a claim of a bearer token.
type JWTClaimSource struct {
	// Header carrying the token; empty is Authorization.
	Header string `json:"header,omitempty"`
	// Claim to read.
	Claim string `json:"claim"`
}

// DescriptorSource is an Envoy descriptor entry.
type DescriptorSource struct {
	// Key of the entry.
	Key string `json:"key"`
}

// FixedSource is one value for every caller.
type FixedSource struct {
	// Value of the identity.
	Value string `json:"value"`
}
