package usageapi

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// TestReadQuery: a usage read's parameters become a peek of the named policy, and a bad one
// is refused naming it, before anything is read.
func TestReadQuery(t *testing.T) {
	req, err := readQuery("orders", url.Values{"identity": {"a b/c"}, "tier": {"pro"}, "cost": {"3"}})
	if err != nil || req.Policy != "orders" || req.Identity != "a b/c" || req.Tier != "pro" || req.Cost != 3 || !req.Peek {
		t.Fatalf("identity, tier, cost: %+v, %v", req, err)
	}
	req, err = readQuery("orders", url.Values{"part": {"acme", "POST"}})
	if err != nil || len(req.Parts) != 2 || req.Parts[1] != "POST" || !req.Peek {
		t.Fatalf("parts: %+v, %v", req, err)
	}
	for _, c := range []struct {
		q     url.Values
		field string
	}{
		{url.Values{"identity": {"a"}, "part": {"b"}}, "identity:"},
		{url.Values{"cost": {"-1"}}, "cost:"},
		{url.Values{"cost": {"1.5"}}, "cost:"},
		{url.Values{"cost": {"x"}}, "cost:"},
		{url.Values{"idenity": {"a"}}, "idenity: unknown parameter"},
		{url.Values{"requestId": {"r1"}}, "requestId: unknown parameter"},
	} {
		if _, err := readQuery("orders", c.q); err == nil || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("%v: %v; want an error beginning %q", c.q, err, c.field)
		}
	}
}

// TestReadTopQuery: an overview's parameters, defaults when absent, a continuation read back
// as its position, and each bad one refused naming it.
func TestReadTopQuery(t *testing.T) {
	q, err := readTopQuery(url.Values{})
	if err != nil || q.n != defaultTopN || q.max != defaultTopMax || q.tier != "" {
		t.Fatalf("defaults: %+v, %v", q, err)
	}
	q, err = readTopQuery(url.Values{"n": {"100"}, "max": {"100000"}, "tier": {"pro"}})
	if err != nil || q.n != 100 || q.max != 100000 || q.tier != "pro" || q.at != (limiter.ScanPosition{}) {
		t.Fatalf("n, max, tier: %+v, %v", q, err)
	}
	at := limiter.ScanPosition{Primary: 2, Cursor: 123456789}
	if q, err = readTopQuery(url.Values{"continue": {encodeContinuation(at)}}); err != nil || q.at != at {
		t.Fatalf("continue: %+v, %v; want the position %+v", q, err, at)
	}
	for _, c := range []struct {
		q     url.Values
		field string
	}{
		{url.Values{"n": {"0"}}, "n:"},
		{url.Values{"n": {"101"}}, "n:"},
		{url.Values{"max": {"100001"}}, "max:"},
		{url.Values{"max": {"x"}}, "max:"},
		{url.Values{"identity": {"a"}}, "identity: unknown parameter"},
		{url.Values{"continue": {"not-a-position"}}, "continue:"},
		{url.Values{"continue": {""}}, "continue:"},
		{url.Values{"continue": {encodeContinuation(limiter.ScanPosition{}), encodeContinuation(limiter.ScanPosition{})}}, "continue:"},
	} {
		if _, err := readTopQuery(c.q); err == nil || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("%v: %v; want an error beginning %q", c.q, err, c.field)
		}
	}
}

// TestReadAdjust: an adjustment's body is one JSON object of known fields, identity or parts.
func TestReadAdjust(t *testing.T) {
	req, err := readAdjust(strings.NewReader(`{"identity":"alice","amount":3,"requestId":"t-1","tier":"pro"}`))
	if err != nil || req.Identity != "alice" || req.Amount != 3 || req.RequestID != "t-1" || req.Tier != "pro" {
		t.Fatalf("a grant's body: %+v, %v", req, err)
	}
	for _, c := range []struct{ body, want string }{
		{`{"identity":"a","parts":["b"],"requestId":"r"}`, "identity:"},
		{`{"identity":"a","amont":3}`, "body:"},
		{`{"identity":"a"} {"identity":"b"}`, "body:"},
		{`[1]`, "body:"},
		{`{"identity":"` + strings.Repeat("a", 70<<10) + `"}`, "body is larger"},
	} {
		if _, err := readAdjust(strings.NewReader(c.body)); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%.60s: %v; want an error beginning %q", c.body, err, c.want)
		}
	}
}
