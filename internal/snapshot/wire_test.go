package snapshot_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/golden"
)

// fullDocument is a snapshot document that sets every field the wire format has, once: the
// contract with every sidecar in the field. Its sealed canonical form is
// testdata/wire-v1.json.
const fullDocument = `{
  "schemaVersion": 1,
  "namespace": "shop",
  "keyPrefix": "rl:",
  "redis": {"mode": "sentinel", "addrs": ["s1:26379", "s2:26379"], "masterName": "mymaster", "db": 2, "tls": true, "functions": true},
  "scripts": [{"name": "token_bucket", "sha": "0123456789abcdef0123456789abcdef01234567"}],
  "policies": [{
    "name": "api",
    "match": {
      "http": [{"hosts": ["api.example.com"], "pathPrefixes": ["/v1/"], "methods": ["GET", "POST"]}],
      "envoy": {"domain": "edge", "descriptors": [{"key": "route", "value": "orders"}, {"key": "user"}]}
    },
    "identity": {
      "sources": [
        {"type": "Header", "header": {"name": "X-API-Key"}},
        {"type": "ClientIP", "clientIP": {"ipv4PrefixLength": 24, "ipv6PrefixLength": 64, "trustedProxies": 1}},
        {"type": "JWTClaim", "jwtClaim": {"header": "Authorization", "claim": "sub"}},
        {"type": "Descriptor", "descriptor": {"key": "user"}},
        {"type": "Fixed", "fixed": {"value": "everyone"}}
      ],
      "onMissing": "Reject"
    },
    "algorithm": "TokenBucket",
    "script": "token_bucket",
    "sha": "0123456789abcdef0123456789abcdef01234567",
    "limits": [{"name": "per-second", "requests": 10, "periodMs": 1000, "burst": 20}],
    "cost": {"default": 2, "header": "X-Cost", "max": 50},
    "stateKey": "{rl:shop/api:${identity}}:${limit}",
    "idempotencyKey": "{rl:shop/api:${identity}}:idem:${requestId}",
    "ttlMs": 60000,
    "idempotency": {"header": "Idempotency-Key", "descriptorKey": "request_id", "ttlMs": 60000, "maxReplays": 3},
    "failureMode": "LocalCap",
    "localCap": {"requests": 5, "periodMs": 1000, "maxIdentities": 1000},
    "shadow": true,
    "leases": true,
    "shards": 4
  }]
}`

// plansDocument adds tiers and overrides to a policy: features a sidecar built before them
// refuses whole (the content hash differs), so they have a golden file of their own and
// wire-v1.json stays as every older sidecar reads it.
const plansDocument = `{
  "schemaVersion": 1,
  "namespace": "shop",
  "redis": {"mode": "standalone", "addrs": ["redis:6379"]},
  "scripts": [{"name": "fixed_window", "sha": "0123456789abcdef0123456789abcdef01234567"}],
  "policies": [{
    "name": "plans",
    "match": {"http": [{"pathPrefixes": ["/v1/"]}]},
    "identity": {"sources": [{"type": "Header", "header": {"name": "X-API-Key"}}]},
    "algorithm": "FixedWindow",
    "script": "fixed_window",
    "sha": "0123456789abcdef0123456789abcdef01234567",
    "limits": [{"name": "daily", "requests": 1000, "periodMs": 86400000}],
    "tiers": [
      {"name": "pro", "when": "headers[\"x-plan\"] == \"pro\"", "limits": [{"name": "daily", "requests": 100000, "periodMs": 86400000}, {"name": "per-second", "requests": 50, "periodMs": 1000}]}
    ],
    "overrides": [
      {"name": "acme-launch", "tier": "pro", "callers": ["1a2b3c4d5e6f7081", "9f8e7d6c5b4a3921"], "expiresMs": 1900000000000},
      {"name": "globex", "limits": [{"name": "daily", "requests": 250000, "periodMs": 86400000}], "callers": ["0011223344556677"]}
    ],
    "cost": {"default": 1},
    "stateKey": "{rl:shop/plans:${identity}}:${limit}",
    "ttlMs": 86400000,
    "failureMode": "FailOpen"
  }]
}`

// partsDocument has a composite identity (parts) and the sources only the HTTP fronts read
// (Method, PathPrefix): a feature a sidecar built before it refuses whole (the content hash
// differs), so it has a golden file of its own and wire-v1.json stays as every older
// sidecar reads it.
const partsDocument = `{
  "schemaVersion": 1,
  "namespace": "shop",
  "redis": {"mode": "standalone", "addrs": ["redis:6379"]},
  "scripts": [{"name": "fixed_window", "sha": "0123456789abcdef0123456789abcdef01234567"}],
  "policies": [{
    "name": "per-key-route-method",
    "match": {"http": [{"pathPrefixes": ["/v1/orders", "/v1/users"]}]},
    "identity": {
      "parts": [
        {"sources": [{"type": "Header", "header": {"name": "X-API-Key"}}, {"type": "JWTClaim", "jwtClaim": {"claim": "tenant"}}]},
        {"sources": [{"type": "PathPrefix"}]},
        {"sources": [{"type": "Method"}]}
      ],
      "onMissing": "Shared"
    },
    "algorithm": "FixedWindow",
    "script": "fixed_window",
    "sha": "0123456789abcdef0123456789abcdef01234567",
    "limits": [{"name": "per-minute", "requests": 100, "periodMs": 60000}],
    "cost": {"default": 1},
    "stateKey": "{rl:shop/per-key-route-method:${identity}}:${limit}",
    "ttlMs": 60000,
    "failureMode": "FailOpen"
  }]
}`

// TestWireFormatIsStable holds the snapshot's wire format to its golden files: a document
// setting every field, sealed, must come out byte for byte, and the golden file must parse
// (its version matches its content) and come out unchanged. A renamed, dropped or retyped
// field fails it: sidecars of every version read these bytes, so a change to them needs a
// new schema version, not an edit of a golden file.
func TestWireFormatIsStable(t *testing.T) {
	for file, doc := range map[string]string{"wire-v1.json": fullDocument, "wire-plans.json": plansDocument, "wire-parts.json": partsDocument} {
		t.Run(file, func(t *testing.T) { checkWire(t, file, doc) })
	}
}

func checkWire(t *testing.T, file, doc string) {
	path := filepath.Join("testdata", file)
	var s snapshot.Snapshot
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("the full document has a field the wire format lacks: %v", err)
	}
	want := golden.Check(t, path, sealed(t, &s), "the wire format")
	parsed, err := snapshot.Parse(want)
	if err != nil {
		t.Fatalf("parse the golden document: %v", err)
	}
	again, err := parsed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Fatalf("the golden document does not come out as it went in:\n got %s\nwant %s", again, want)
	}
}
