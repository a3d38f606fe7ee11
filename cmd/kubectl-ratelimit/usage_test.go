package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestUsageDeniedTable: a 429 is an answer (exit 0), shown as a decision and a limits table;
// the request names the namespace and policy in its path and carries only the parameters given.
func TestUsageDeniedTable(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusTooManyRequests, deniedBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t),
		"usage", "-n", "shop", "orders", "alice", "--tier", "pro", "--cost", "2")...)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	want := `POLICY   TIER   IDENTITY   DECISION
orders   pro    alice      denied (per-minute: retry in 11.9s)

LIMIT        QUOTA   USED   REMAINING   FULL AGAIN IN   WAIT
per-minute   5       5      0           59.9s           11.9s
`
	if res.stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", res.stdout, want)
	}
	seen := srv.lastRequest(t)
	if seen.method != http.MethodGet || seen.path != "/v1/namespaces/shop/ratelimitpolicies/orders/usage" {
		t.Errorf("%s %q", seen.method, seen.path)
	}
	wantQuery := map[string][]string{"identity": {"alice"}, "tier": {"pro"}, "cost": {"2"}}
	if !reflect.DeepEqual(map[string][]string(seen.query), wantQuery) {
		t.Errorf("query %v, want %v", seen.query, wantQuery)
	}
	if seen.auth != "Bearer "+testToken {
		t.Errorf("Authorization %q", seen.auth)
	}
}

// TestUsageAllowedTable: a 200 shows what is left of the reported limit, every limit of the
// tier, and "default" for a policy without tiers; no parameter is sent that was not given.
func TestUsageAllowedTable(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "usage", "orders")...)
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	want := `POLICY   TIER      IDENTITY   DECISION
orders   default   -          allowed (per-minute: 3 of 5 left)

LIMIT        QUOTA   USED   REMAINING   FULL AGAIN IN   WAIT
per-minute   5       2      3           24s             now
per-day      1000    2      998         23h59m59s       now
`
	if res.stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", res.stdout, want)
	}
	if seen := srv.lastRequest(t); len(seen.query) != 0 {
		t.Errorf("query %v, want none", seen.query)
	}
}

// TestUsageFailOpenTable: an answer Redis did not give says who gave it, and that the counts
// are unknown.
func TestUsageFailOpenTable(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, failOpenBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "usage", "orders", "bob")...)
	want := `POLICY   TIER      IDENTITY   DECISION
orders   default   bob        allowed

decided without Redis by FailOpen: counts unknown
`
	if res.code != 0 || res.stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s", res.code, res.stdout, want)
	}
}

// TestUsageJSON: -o json prints the server's body, indented, for a 200 and a 429 alike.
func TestUsageJSON(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{{http.StatusOK, allowedBody}, {http.StatusTooManyRequests, deniedBody}} {
		srv := newFakeUsageServer(t, testToken, tc.status, tc.body)
		res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "usage", "orders", "alice", "-o", "json")...)
		if res.code != 0 {
			t.Fatalf("%d: exit %d, stderr %q", tc.status, res.code, res.stderr)
		}
		if !strings.HasPrefix(res.stdout, "{\n  \"policy\": \"orders\",\n") {
			t.Errorf("%d: not indented:\n%s", tc.status, res.stdout)
		}
		var got, want any
		if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
			t.Fatalf("%d: %v", tc.status, err)
		}
		if err := json.Unmarshal([]byte(tc.body), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d: printed %v, want the server's %v", tc.status, got, want)
		}
	}
}

// TestUsageOddIdentity: an identity holding a space, a slash, '?' and '&' reaches the server
// as it was given, and so do composite parts, in order; a policy name is path-escaped.
func TestUsageOddIdentity(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	kubeconfig := tokenKubeconfig(t)
	odd := "a b/c?d&e"
	if res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "usage", "orders", odd)...); res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "usage", "o/r?s",
		"--part", odd, "--part", "x,y", "--part", "")...); res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	seen := srv.requests()
	if got := seen[0].query["identity"]; len(got) != 1 || got[0] != odd {
		t.Errorf("identity reached the server as %q, want [%q]", got, odd)
	}
	if got, want := seen[1].query["part"], []string{odd, "x,y", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("parts reached the server as %q, want %q", got, want)
	}
	if want := "/v1/namespaces/shop/ratelimitpolicies/o%2Fr%3Fs/usage"; seen[1].path != want {
		t.Errorf("path %q, want %q", seen[1].path, want)
	}
}

// TestUsageIdentityAndParts: IDENTITY and --part together are refused, naming the flag,
// before anything is sent.
func TestUsageIdentityAndParts(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "usage", "orders", "alice", "--part", "x")...)
	if res.code != 1 || !strings.Contains(res.stderr, "--part") {
		t.Errorf("exit %d, stderr %q: want 1 and an error naming --part", res.code, res.stderr)
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestUsageServerErrors: any status but 200 and 429 is an error, exit 1, printed as
// "error: <status>: <the server's message>".
func TestUsageServerErrors(t *testing.T) {
	for _, tc := range []struct {
		status  int
		token   string
		body    string
		wantErr string
	}{
		{http.StatusUnauthorized, "another-token", "", "error: 401 Unauthorized: the bearer token is not valid\n"},
		{http.StatusForbidden, testToken, `{"error":"alice may not get ratelimitpolicies/usage in namespace shop"}`,
			"error: 403 Forbidden: alice may not get ratelimitpolicies/usage in namespace shop\n"},
		{http.StatusNotFound, testToken, `{"error":"no policy orders in namespace shop"}`,
			"error: 404 Not Found: no policy orders in namespace shop\n"},
		{http.StatusServiceUnavailable, testToken, "redis down\n", "error: 503 Service Unavailable: redis down\n"},
	} {
		srv := newFakeUsageServer(t, tc.token, tc.status, tc.body)
		res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "usage", "orders", "alice")...)
		if res.code != 1 || res.stderr != tc.wantErr || res.stdout != "" {
			t.Errorf("%d: exit %d, stdout %q, stderr %q; want 1 and %q", tc.status, res.code, res.stdout, res.stderr, tc.wantErr)
		}
	}
}

// TestUsageBadArguments: a bad output format, a missing policy, an API server that does not
// answer (no --server: the kubeconfig's) and plain http are errors, exit 1.
func TestUsageBadArguments(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	kubeconfig := tokenKubeconfig(t)
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{srv.args(t, "--kubeconfig", kubeconfig, "usage", "orders", "-o", "yaml"), `--output "yaml"`},
		{srv.args(t, "--kubeconfig", kubeconfig, "usage"), "accepts between 1 and 2 arg(s)"},
		{[]string{"--kubeconfig", kubeconfig, "usage", "orders"},
			"calling the Kubernetes API server: Get \"https://127.0.0.1:1/apis/usage.ratelimit.dev/v1alpha1/namespaces/shop/ratelimitpolicies/orders/usage\""},
		{[]string{"--server", "http://example.com", "--kubeconfig", kubeconfig, "usage", "orders"}, "in clear"},
	} {
		res := runPlugin(t, tc.args...)
		if res.code != 1 || !strings.Contains(res.stderr, tc.wantErr) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tc.args, res.code, res.stderr, tc.wantErr)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestUsageServerFromEnvironment: $RATELIMIT_USAGE_SERVER stands for --server.
func TestUsageServerFromEnvironment(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	t.Setenv(serverEnv, srv.URL+"/")
	res := runPlugin(t, "--certificate-authority", srv.caFile(t), "--kubeconfig", tokenKubeconfig(t), "usage", "orders")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if seen := srv.lastRequest(t); seen.path != "/v1/namespaces/shop/ratelimitpolicies/orders/usage" {
		t.Errorf("path %q", seen.path)
	}
}

// TestUsageNamespace: the namespace is -n, else the kubeconfig context's (--context chooses
// the context, $KUBECONFIG the file), else "default".
func TestUsageNamespace(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	t.Setenv("KUBECONFIG", tokenKubeconfig(t))
	for _, args := range [][]string{
		{"usage", "orders"},
		{"usage", "orders", "-n", "billing"},
		{"--context", "other", "usage", "orders"},
		{"--namespace", "billing", "--context", "other", "usage", "orders"},
	} {
		if res := runPlugin(t, srv.args(t, args...)...); res.code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, res.code, res.stderr)
		}
	}
	var got []string
	for _, seen := range srv.requests() {
		got = append(got, strings.Split(seen.path, "/")[3])
	}
	if want := []string{"shop", "billing", "default", "billing"}; !reflect.DeepEqual(got, want) {
		t.Errorf("namespaces %q, want %q", got, want)
	}
}
