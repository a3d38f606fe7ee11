package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Override is one RateLimitOverride as the snapshot carries it: callers, by the hash of
// their identity only (a credential never lands in a snapshot), given a tier of the policy
// or limits of their own until an expiry.
type Override struct {
	// Name of the RateLimitOverride.
	Name string `json:"name"`
	// Tier names the tier of the policy the callers get; empty with Limits.
	Tier string `json:"tier,omitempty"`
	// Limits are the callers' own limits; empty with Tier.
	Limits []Limit `json:"limits,omitempty"`
	// Callers are IdentityHash of each caller's identity, sorted.
	Callers []string `json:"callers"`
	// ExpiresMs is when the override stops applying, in ms since the epoch; 0 never.
	ExpiresMs int64 `json:"expiresMs,omitempty"`
}

// IdentityHash is how an identity is named wherever it must not appear as is (metrics,
// overrides): the first 16 hex digits of its SHA-256. An identity is often a credential
// (an API key, a token's claim); an operator who suspects one hashes it to compare
// (printf %s "$identity" | sha256sum | cut -c1-16).
func IdentityHash(identity string) string {
	sum := IdentitySum(identity)
	return hex.EncodeToString(sum[:])
}

// IdentitySum is IdentityHash before hex encoding: the first 8 bytes of the SHA-256, what a
// sidecar compares per request without building a string.
func IdentitySum(identity string) [8]byte {
	sum := sha256.Sum256([]byte(identity))
	return [8]byte(sum[:8])
}

// Sourced is the identity of value v read from source i of id.Sources (see the function
// Sourced).
func (id Identity) Sourced(i int, v string) string { return Sourced(len(id.Sources), i, v) }

// Sourced is the identity of value v read from source i of a chain of n sources. With
// several sources each one's identities are kept apart by the source's position
// ("1=10.0.0.5"): otherwise a caller whose API key is another caller's address (or a Fixed
// fallback's value) would spend that caller's quota. A chain of one source keeps the bare
// value.
func Sourced(n, i int, v string) string {
	if n < 2 {
		return v
	}
	return strconv.Itoa(i) + "=" + v
}
