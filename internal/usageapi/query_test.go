package usageapi

import (
	"net/url"
	"strings"
	"testing"
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
