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

// calendarDocument has limits counted per calendar window (a month in Berlin, in a tier and
// an override too): a feature a sidecar built before it refuses whole (the content hash
// differs), so it has a golden file of its own and wire-v1.json stays as every older
// sidecar reads it.
const calendarDocument = `{
  "schemaVersion": 1,
  "namespace": "shop",
  "redis": {"mode": "standalone", "addrs": ["redis:6379"]},
  "scripts": [{"name": "fixed_window", "sha": "0123456789abcdef0123456789abcdef01234567"}],
  "policies": [{
    "name": "monthly",
    "match": {"http": [{"pathPrefixes": ["/v1/"]}]},
    "identity": {"sources": [{"type": "Header", "header": {"name": "X-API-Key"}}]},
    "algorithm": "FixedWindow",
    "script": "fixed_window",
    "sha": "0123456789abcdef0123456789abcdef01234567",
    "limits": [
      {"name": "monthly", "requests": 3, "periodMs": 2678400000, "calendar": {"unit": "Month", "timeZone": "Europe/Berlin"}},
      {"name": "per-second", "requests": 10, "periodMs": 1000}
    ],
    "tiers": [
      {"name": "pro", "when": "headers[\"x-plan\"] == \"pro\"", "limits": [{"name": "daily", "requests": 1000, "periodMs": 86400000, "calendar": {"unit": "Day", "timeZone": "UTC"}}]}
    ],
    "overrides": [
      {"name": "acme", "limits": [{"name": "weekly", "requests": 50, "periodMs": 604800000, "calendar": {"unit": "Week", "timeZone": "America/New_York"}}], "callers": ["0011223344556677"]}
    ],
    "cost": {"default": 1},
    "stateKey": "{rl:shop/monthly:${identity}}:${limit}",
    "ttlMs": 3600000,
    "failureMode": "FailOpen"
  }]
}`

// TestWireFormatIsStable holds the snapshot's wire format to its golden files: a document
// setting every field, sealed, must come out byte for byte, and the golden file must parse
// (its version matches its content) and come out unchanged. A renamed, dropped or retyped
// field fails it: sidecars of every version read these bytes, so a change to them needs a
// new schema version, not an edit of a golden file.
func TestWireFormatIsStable(t *testing.T) {
	for file, doc := range map[string]string{"wire-v1.json": fullDocument, "wire-plans.json": plansDocument, "wire-parts.json": partsDocument,
		"wire-calendar.json": calendarDocument} {
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

// TestCalendarRoundTrip: a calendar limit's unit and time zone survive sealing and parsing,
// in spec.limits, tiers and overrides, and a limit without one stays without.
func TestCalendarRoundTrip(t *testing.T) {
	var s snapshot.Snapshot
	if err := json.Unmarshal([]byte(calendarDocument), &s); err != nil {
		t.Fatal(err)
	}
	parsed, err := snapshot.Parse(sealed(t, &s))
	if err != nil {
		t.Fatal(err)
	}
	p := parsed.Policies[0]
	for _, c := range []struct {
		got  snapshot.Limit
		want string
	}{
		{p.Limits[0], "calendar Month in Europe/Berlin"},
		{p.Limits[1], "1s"},
		{p.Tiers[0].Limits[0], "calendar Day in UTC"},
		{p.Overrides[0].Limits[0], "calendar Week in America/New_York"},
	} {
		if got := c.got.Per(); got != c.want {
			t.Errorf("limit %s per %q, want %q", c.got.Name, got, c.want)
		}
	}
	if p.Limits[1].Calendar != nil {
		t.Errorf("a period limit gained a calendar: %+v", p.Limits[1].Calendar)
	}
}
