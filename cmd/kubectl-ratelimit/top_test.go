package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// Answers of the usage server to overviews.
const (
	topBody = `{"policy":"orders","callers":42,"denied":7,"deniedShare":0.16666666666666666,` +
		`"truncated":true,"unreadable":3,"top":[` +
		`{"identityHash":"2bd806c97f0e00af","allowed":false,"limits":[` +
		`{"name":"per-minute","quota":5,"used":5,"remaining":0,"resetAfterMs":58473,"retryAfterMs":11873},` +
		`{"name":"per-day","quota":1000,"used":412,"remaining":588,"resetAfterMs":86399000,"retryAfterMs":0}]},` +
		`{"identityHash":"77aa01c3e5f90b12","tier":"gold","allowed":true,"limits":[` +
		`{"name":"per-minute","quota":50,"used":31,"remaining":19,"resetAfterMs":24000,"retryAfterMs":0}]}]}`
	topEmptyBody = `{"policy":"orders","tier":"gold","callers":0,"denied":0,"deniedShare":0,` +
		`"truncated":false,"top":[]}`
)

// TestTopRequests: the overview is asked for at .../usage/top, its path escaped as usage's,
// with only the parameters given.
func TestTopRequests(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		wantPath  string
		wantQuery map[string][]string
	}{
		{[]string{"top", "orders"}, "/v1/namespaces/shop/ratelimitpolicies/orders/usage/top", map[string][]string{}},
		{[]string{"top", "-n", "billing", "o/r?s", "--n", "25", "--max", "50000", "--tier", "gold"},
			"/v1/namespaces/billing/ratelimitpolicies/o%2Fr%3Fs/usage/top",
			map[string][]string{"n": {"25"}, "max": {"50000"}, "tier": {"gold"}}},
		{[]string{"top", "orders", "--max", "1"}, "/v1/namespaces/shop/ratelimitpolicies/orders/usage/top",
			map[string][]string{"max": {"1"}}},
		{[]string{"top", "orders", "--n=100", "--tier", "a b&c"}, "/v1/namespaces/shop/ratelimitpolicies/orders/usage/top",
			map[string][]string{"n": {"100"}, "tier": {"a b&c"}}},
	} {
		srv := newFakeUsageServer(t, testToken, http.StatusOK, topBody)
		res := runPlugin(t, srv.args(t, append([]string{"--kubeconfig", tokenKubeconfig(t)}, tc.args...)...)...)
		if res.code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", tc.args, res.code, res.stderr)
		}
		seen := srv.lastRequest(t)
		if seen.method != http.MethodGet || seen.path != tc.wantPath || seen.auth != "Bearer "+testToken {
			t.Errorf("%q: %s %q, Authorization %q; want GET %q", tc.args, seen.method, seen.path, seen.auth, tc.wantPath)
		}
		if !reflect.DeepEqual(map[string][]string(seen.query), tc.wantQuery) {
			t.Errorf("%q: query %v, want %v", tc.args, seen.query, tc.wantQuery)
		}
	}
}

// TestTopTable: the overview, notes on the callers not read, then a row per limit of each
// caller, the caller's columns on its first row only.
func TestTopTable(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, topBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders")...)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	want := `POLICY   CALLERS   DENIED      TIER
orders   42        7 (16.7%)   (each caller's own)
(more callers hold counters than were read: raise --max)
(3 callers with identities over 128 bytes of key text not shown)

CALLER             TIER      DECISION   LIMIT        USED   QUOTA   FULL AGAIN IN
2bd806c97f0e00af   default   denied     per-minute   5      5       58.5s
                                        per-day      412    1000    23h59m59s
77aa01c3e5f90b12   gold      allowed    per-minute   31     50      24s
`
	if res.stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", res.stdout, want)
	}
}

// TestTopEmpty: without callers, the overview and a line that says so.
func TestTopEmpty(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, topEmptyBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders", "--tier", "gold")...)
	want := `POLICY   CALLERS   DENIED   TIER
orders   0         0        gold

no caller holds counters of orders now
`
	if res.code != 0 || res.stdout != want {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", res.code, res.stderr, res.stdout, want)
	}
}

// TestTopJSON: -o json prints the server's body, indented.
func TestTopJSON(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, topBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders", "-o", "json")...)
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if !strings.HasPrefix(res.stdout, "{\n  \"policy\": \"orders\",\n") {
		t.Errorf("not indented:\n%s", res.stdout)
	}
	var got, want any
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(topBody), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("printed %v, want the server's %v", got, want)
	}
}

// TestTopBadArguments: a bad --n, --max or output format and a missing policy are refused,
// naming the flag, before anything is sent.
func TestTopBadArguments(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, topBody)
	requireRefusedLocally(t, srv, []refusal{
		{[]string{"top", "orders", "--n", "0"}, "--n 0: want a whole number from 1 to 100"},
		{[]string{"top", "orders", "--n", "101"}, "--n 101"},
		{[]string{"top", "orders", "--n", "-3"}, "--n -3"},
		{[]string{"top", "orders", "--n", "ten"}, `"ten" for "--n"`},
		{[]string{"top", "orders", "--max", "0"}, "--max 0: want a whole number from 1 to 100000"},
		{[]string{"top", "orders", "--max", "100001"}, "--max 100001"},
		{[]string{"top", "orders", "-o", "yaml"}, `--output "yaml"`},
		{[]string{"top"}, "accepts 1 arg(s)"},
		{[]string{"top", ""}, "POLICY is empty"},
	})
}

// TestTopServerErrors: any status but 200 is an error, exit 1, printed as "error: <status>:
// <the server's message>", never with the token.
func TestTopServerErrors(t *testing.T) {
	for _, tc := range []struct {
		status  int
		body    string
		wantErr string
	}{
		{http.StatusForbidden, `{"error":"alice may not get ratelimitpolicies/usage in namespace shop"}`,
			"error: 403 Forbidden: alice may not get ratelimitpolicies/usage in namespace shop\n"},
		{http.StatusBadRequest, `{"error":"n: \"0\" is not a whole number from 1 to 100"}`,
			"error: 400 Bad Request: n: \"0\" is not a whole number from 1 to 100\n"},
		{http.StatusServiceUnavailable, `{"error":"redis down"}`, "error: 503 Service Unavailable: redis down\n"},
	} {
		srv := newFakeUsageServer(t, testToken, tc.status, tc.body)
		res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders")...)
		if res.code != 1 || res.stderr != tc.wantErr || res.stdout != "" {
			t.Errorf("%d: exit %d, stdout %q, stderr %q; want 1 and %q", tc.status, res.code, res.stdout, res.stderr, tc.wantErr)
		}
		if strings.Contains(res.stderr, testToken) {
			t.Errorf("%d: the token reached stderr: %q", tc.status, res.stderr)
		}
	}
}
