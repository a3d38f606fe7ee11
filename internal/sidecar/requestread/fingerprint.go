package requestread

import (
	"strconv"
	"strings"
)

// requestFingerprint joins the parts that describe a request into one fingerprint (the
// engine's Check.Fingerprint),
// each length-prefixed so that no two different lists of parts give the same text.
func requestFingerprint(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// HTTPFingerprint describes an HTTP request for idempotency: its method, host (as
// CanonicalHost gave it), path and query, as the policies were matched on.
func HTTPFingerprint(method, host, path, query string) string {
	return requestFingerprint(method, host, path, query)
}

// DescriptorFingerprint describes an Envoy request for idempotency: its domain and every
// entry of the descriptor, each length-prefixed.
func DescriptorFingerprint(domain string, entries []DescriptorEntry) string {
	parts := make([]string, 0, 1+2*len(entries))
	parts = append(parts, domain)
	for _, e := range entries {
		parts = append(parts, e.Key, e.Value)
	}
	return requestFingerprint(parts...)
}
