// Package jwtpayload reads the payload of a bearer JWT without verifying it: the gateway in
// front verified it. The identity sources (a claim as the caller's identity) and the tier
// conditions (claims a condition reads) both read tokens through it, so both agree on which
// tokens they accept.
package jwtpayload

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// MaxBytes bounds the tokens decoded: a larger one is read as no token.
const MaxBytes = 16 << 10

// Decode is the JSON payload of the "Bearer <jwt>" credential authz, numbers kept as
// json.Number so a numeric id keeps every digit; ok is false when authz holds no such
// token.
func Decode(authz string) (payload any, ok bool) {
	token, ok := BearerToken(authz)
	if !ok || len(token) > MaxBytes {
		return nil, false
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&payload) != nil {
		return nil, false
	}
	return payload, true
}

// BearerToken is the token of a "Bearer <token>" credential. The scheme is compared
// case-insensitively (RFC 9110 section 11.1) and any run of spaces or tabs may separate it
// from the token: servers accept "bearer x" and "Bearer  x" alike, and reading no token
// where the upstream reads one would let the policy's missing-identity rule decide instead.
func BearerToken(authz string) (string, bool) {
	i := strings.IndexAny(authz, " \t")
	if i < 0 || !strings.EqualFold(authz[:i], "Bearer") {
		return "", false
	}
	return strings.TrimLeft(authz[i:], " \t"), true
}
