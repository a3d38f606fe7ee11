package sidecar

import (
	"strconv"
	"strings"
)

// Fingerprint joins the parts that describe a request into one Check.Fingerprint, each
// length-prefixed so that no two different lists of parts give the same text.
func Fingerprint(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// HTTPFingerprint describes an HTTP request for idempotency: its method, host (without port,
// lower-cased), path and query, as the policies were matched on.
func HTTPFingerprint(method, host, path, query string) string {
	return Fingerprint(method, hostOnly(host), path, query)
}
