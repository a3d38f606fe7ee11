package v1alpha1

// Identity says who the caller is, in one of two shapes. sources is a fallback chain: the
// first source that yields a non-empty value is the identity. parts is a composite
// identity: each part is such a chain, and every combination of the parts' values has its
// own counters (API key and path prefix, tenant claim and method). Identity values are
// untrusted: they are encoded before they become part of a Redis key, so no value can move
// a key to another slot or another caller.
//
// +kubebuilder:validation:XValidation:rule="has(self.sources) != has(self.parts)",message="set exactly one of sources (a fallback chain: the first source present is the identity) and parts (a composite identity: one counter per combination of the parts' values)"
// +kubebuilder:validation:XValidation:rule="!has(self.parts) || self.parts.exists(p, p.sources.exists(s, s.type != 'Fixed'))",message="every part is Fixed, so every caller shares one counter: for a global limit use sources with one Fixed source",fieldPath=".parts"
type Identity struct {
	// sources are the places the identity is read from, in order of preference. With
	// several sources, each source's identities are counted apart (the identity records
	// which source yielded it), so a caller whose header names another caller's address, or
	// a Fixed source's value, never spends that caller's quota. Set sources or parts.
	// +optional
	Sources IdentitySources `json:"sources,omitempty"`

	// parts make a composite identity: each part is a fallback chain of sources, read as
	// sources is, and each combination of the parts' values (API key and path prefix, say)
	// gets its own counters. A value of one part never spends another combination's quota,
	// whatever separators it holds. Set sources or parts.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=4
	Parts []IdentityPart `json:"parts,omitempty"`

	// onMissing is what happens to a request for which no source yields a value (with
	// parts: for which some part yields none). Shared counts it under one shared
	// "anonymous" identity (with parts: the missing part counts as one shared value of its
	// own, distinct from every real value, and the parts present still count apart), Reject
	// denies it, Skip admits it without counting.
	// +optional
	// +kubebuilder:default=Shared
	OnMissing MissingIdentityAction `json:"onMissing,omitempty"`
}

// IdentitySources is a fallback chain of identity sources: the first that yields a
// non-empty value names the caller. A Fixed source always yields one, so it can only come
// last.
//
// +listType=atomic
// +kubebuilder:validation:MinItems=1
// +kubebuilder:validation:MaxItems=8
// +kubebuilder:validation:XValidation:rule="size(self.filter(s, s.type == 'Fixed')) == 0 || (size(self.filter(s, s.type == 'Fixed')) == 1 && self[size(self) - 1].type == 'Fixed')",message="a Fixed source always yields a value, so there can be only one and it must be the last source"
type IdentitySources []IdentitySource

// IdentityPart is one part of a composite identity.
type IdentityPart struct {
	// sources are where the part's value is read from, in order of preference, with the
	// rules of identity.sources: the first source that yields a value names the part.
	// +required
	Sources IdentitySources `json:"sources"`
}

// MissingIdentityAction is what happens to a request that has no identity.
// +kubebuilder:validation:Enum=Shared;Reject;Skip
type MissingIdentityAction string

const (
	// MissingIdentityShared counts every request without identity under one shared identity.
	MissingIdentityShared MissingIdentityAction = "Shared"
	// MissingIdentityReject denies requests without identity.
	MissingIdentityReject MissingIdentityAction = "Reject"
	// MissingIdentitySkip admits requests without identity and counts nothing.
	MissingIdentitySkip MissingIdentityAction = "Skip"
)

// IdentitySourceType names where an identity value comes from.
// +kubebuilder:validation:Enum=Header;ClientIP;JWTClaim;Descriptor;Fixed;Method;PathPrefix
type IdentitySourceType string

const (
	// IdentityHeader reads an HTTP request header.
	IdentityHeader IdentitySourceType = "Header"
	// IdentityClientIP uses the client address, optionally masked to a network prefix.
	IdentityClientIP IdentitySourceType = "ClientIP"
	// IdentityJWTClaim reads a claim of a bearer JWT already verified upstream.
	IdentityJWTClaim IdentitySourceType = "JWTClaim"
	// IdentityDescriptor reads an Envoy rate limit descriptor entry.
	IdentityDescriptor IdentitySourceType = "Descriptor"
	// IdentityFixed uses a constant: every caller shares one identity (a global limit).
	IdentityFixed IdentitySourceType = "Fixed"
	// IdentityMethod is the method the upstream will run: the method-override header
	// (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override) when present, else the
	// request method; HEAD reads as GET, a method outside the standard nine as OTHER.
	// HTTP fronts only.
	IdentityMethod IdentitySourceType = "Method"
	// IdentityPathPrefix is the path prefix of the policy's HTTP match entry that matched
	// the request (the longest of several), normalized as it matches, or "/" when that
	// entry names none: the policy's own text, never the request's path. HTTP fronts only.
	IdentityPathPrefix IdentitySourceType = "PathPrefix"
)

// IdentitySource is one place an identity value can come from. Exactly the member named by
// type is set; Method and PathPrefix have none.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'Header' ? has(self.header) : !has(self.header)",message="header must be set when type is Header, and only then",fieldPath=".header"
// +kubebuilder:validation:XValidation:rule="self.type == 'JWTClaim' ? has(self.jwtClaim) : !has(self.jwtClaim)",message="jwtClaim must be set when type is JWTClaim, and only then",fieldPath=".jwtClaim"
// +kubebuilder:validation:XValidation:rule="self.type == 'Descriptor' ? has(self.descriptor) : !has(self.descriptor)",message="descriptor must be set when type is Descriptor, and only then",fieldPath=".descriptor"
// +kubebuilder:validation:XValidation:rule="self.type == 'Fixed' ? has(self.fixed) : !has(self.fixed)",message="fixed must be set when type is Fixed, and only then",fieldPath=".fixed"
// +kubebuilder:validation:XValidation:rule="self.type == 'ClientIP' || !has(self.clientIP)",message="clientIP may only be set when type is ClientIP",fieldPath=".clientIP"
type IdentitySource struct {
	// type is the kind of source.
	// +required
	Type IdentitySourceType `json:"type"`

	// header reads the identity from an HTTP request header. Set when type is Header.
	// +optional
	Header *HeaderSource `json:"header,omitempty"`

	// clientIP tunes how the client address becomes an identity. Only when type is ClientIP.
	// +optional
	ClientIP *ClientIPSource `json:"clientIP,omitempty"`

	// jwtClaim reads the identity from a claim of a bearer token. Set when type is JWTClaim.
	// +optional
	JWTClaim *JWTClaimSource `json:"jwtClaim,omitempty"`

	// descriptor reads the identity from an Envoy descriptor entry. Set when type is Descriptor.
	// +optional
	Descriptor *DescriptorSource `json:"descriptor,omitempty"`

	// fixed gives every caller the same identity. Set when type is Fixed.
	// +optional
	Fixed *FixedSource `json:"fixed,omitempty"`
}

// HeaderSource reads the identity from an HTTP header.
type HeaderSource struct {
	// name is the header name, for example "X-API-Key"; compared case-insensitively.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`
}

// ClientIPSource turns the client address into an identity.
type ClientIPSource struct {
	// ipv4PrefixLength masks IPv4 addresses to this many leading bits, so a whole network
	// shares one identity. 32 keeps the full address.
	// +optional
	// +kubebuilder:default=32
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=32
	IPv4PrefixLength int32 `json:"ipv4PrefixLength,omitempty"`

	// ipv6PrefixLength masks IPv6 addresses to this many leading bits. 64 groups a subnet,
	// which is what one IPv6 client usually holds.
	// +optional
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=128
	IPv6PrefixLength int32 `json:"ipv6PrefixLength,omitempty"`

	// trustedProxies is how many proxies in front of the sidecar append to X-Forwarded-For;
	// the client is the address that many hops from the right. 0 uses the peer address and
	// ignores X-Forwarded-For, which cannot then be spoofed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	TrustedProxies int32 `json:"trustedProxies,omitempty"`
}

// JWTClaimSource reads a claim from a bearer JWT. The token must already be verified by the
// gateway in front; the sidecar only decodes it.
type JWTClaimSource struct {
	// header is the header carrying "Bearer <token>".
	// +optional
	// +kubebuilder:default=Authorization
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Header string `json:"header,omitempty"`

	// claim is the claim name, for example "sub" or "tenant_id". Nested claims use dots.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Claim string `json:"claim"`
}

// DescriptorSource reads the identity from an Envoy descriptor entry.
type DescriptorSource struct {
	// key is the descriptor entry key whose value is the identity, e.g. "remote_address".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Key string `json:"key"`
}

// FixedSource gives every caller one identity.
type FixedSource struct {
	// value is the identity every caller shares.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Value string `json:"value"`
}
