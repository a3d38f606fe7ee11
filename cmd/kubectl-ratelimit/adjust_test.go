package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// Answers of the usage server to changes.
const (
	grantedBody = `{"policy":"orders","op":"grant","tier":"gold","identityHash":"5c0e2a91d3b4f7e8",` +
		`"replayed":false,"limits":[{"name":"per-minute","quota":5,"remaining":10,"applied":5,` +
		`"resetAfterMs":59873},{"name":"per-day","quota":1000,"remaining":1003,"applied":5,` +
		`"resetAfterMs":86399000}]}`
	resetBody = `{"policy":"orders","op":"reset","tier":"gold","identityHash":"5c0e2a91d3b4f7e8",` +
		`"replayed":false,"limits":[{"name":"per-minute","quota":5,"remaining":5,"applied":-3,` +
		`"resetAfterMs":0}]}`
	refundReplayedBody = `{"policy":"orders","op":"refund","identityHash":"77aa01","replayed":true,` +
		`"limits":[{"name":"per-minute","quota":5,"remaining":4,"applied":3,"resetAfterMs":12000}]}`
)

// generatedID is a request id the plugin makes up.
var generatedID = regexp.MustCompile(`^kubectl-[0-9a-f]{32}$`)

// sentChange decodes the body of a change the server was sent, checking its method and
// content type.
func sentChange(t *testing.T, seen seenRequest) usage.AdjustRequest {
	t.Helper()
	if seen.method != http.MethodPost || seen.contentType != "application/json" {
		t.Errorf("%s with Content-Type %q, want POST with application/json", seen.method, seen.contentType)
	}
	var req usage.AdjustRequest
	if err := json.Unmarshal([]byte(seen.body), &req); err != nil {
		t.Fatalf("body %q: %v", seen.body, err)
	}
	return req
}

// TestAdjustRequests: each op posts to .../usage/{op}, its path escaped as usage's, a body
// holding exactly what was given: identity or parts in order, tier, N (none for a reset) and
// the request id.
func TestAdjustRequests(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantPath string
		wantBody string
	}{
		{[]string{"reset", "-n", "shop", "orders", "alice", "--tier", "gold", "--request-id", "r-1"},
			"/v1/namespaces/shop/ratelimitpolicies/orders/usage/reset",
			`{"identity":"alice","tier":"gold","requestId":"r-1"}`},
		{[]string{"grant", "-n", "billing", "per-tenant-method", "--part", "acme", "--part", "POST", "5", "--request-id", "g-1"},
			"/v1/namespaces/billing/ratelimitpolicies/per-tenant-method/usage/grant",
			`{"parts":["acme","POST"],"amount":5,"requestId":"g-1"}`},
		{[]string{"refund", "o/r?s", "a b/c?d&e", "1000000000", "--request-id", `f/1?x&"y"`},
			"/v1/namespaces/shop/ratelimitpolicies/o%2Fr%3Fs/usage/refund",
			`{"identity":"a b/c?d&e","amount":1000000000,"requestId":"f/1?x&\"y\""}`},
		{[]string{"reset", "orders", "--part", "", "--part", "x,y", "--request-id", "r-2"},
			"/v1/namespaces/shop/ratelimitpolicies/orders/usage/reset",
			`{"parts":["","x,y"],"requestId":"r-2"}`},
	} {
		srv := newFakeUsageServer(t, testToken, http.StatusOK, grantedBody)
		res := runPlugin(t, srv.args(t, append([]string{"--kubeconfig", tokenKubeconfig(t)}, tc.args...)...)...)
		if res.code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", tc.args, res.code, res.stderr)
		}
		seen := srv.lastRequest(t)
		sentChange(t, seen)
		if seen.path != tc.wantPath || seen.auth != "Bearer "+testToken || len(seen.query) != 0 {
			t.Errorf("%q: path %q, Authorization %q, query %v; want %q", tc.args, seen.path, seen.auth, seen.query, tc.wantPath)
		}
		var got, want map[string]any
		if err := json.Unmarshal([]byte(seen.body), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.wantBody), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: body %s, want %s", tc.args, seen.body, tc.wantBody)
		}
	}
}

// TestAdjustGeneratedRequestID: without --request-id a new id is sent and printed, under the
// summary line and above the limits table; two calls get two ids.
func TestAdjustGeneratedRequestID(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, grantedBody)
	kubeconfig := tokenKubeconfig(t)
	var ids []string
	for range 2 {
		res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "grant", "orders", "alice", "5", "--tier", "gold")...)
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
		}
		seen := srv.requests()
		id := sentChange(t, seen[len(seen)-1]).RequestID
		if !generatedID.MatchString(id) {
			t.Fatalf("request id %q, want kubectl- and 32 hex digits", id)
		}
		want := `granted 5 to orders (tier gold) for caller 5c0e2a91d3b4f7e8
request id: ` + id + ` (repeat with --request-id to retry safely)

LIMIT        QUOTA   REMAINING   APPLIED   RESETS IN
per-minute   5       10          5         59.9s
per-day      1000    1003        5         23h59m59s
`
		if res.stdout != want {
			t.Errorf("table:\n%s\nwant:\n%s", res.stdout, want)
		}
		ids = append(ids, id)
	}
	if ids[0] == ids[1] {
		t.Errorf("two calls sent the same request id %q", ids[0])
	}
}

// TestAdjustGivenRequestID: --request-id is sent as given and not printed again; a reset
// shows what it took back.
func TestAdjustGivenRequestID(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, resetBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "reset", "orders", "alice",
		"--request-id", "incident-4711")...)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if got := sentChange(t, srv.lastRequest(t)); got.RequestID != "incident-4711" || got.Amount != 0 {
		t.Errorf("sent request id %q and amount %d, want incident-4711 and none", got.RequestID, got.Amount)
	}
	want := `reset orders (tier gold) for caller 5c0e2a91d3b4f7e8

LIMIT        QUOTA   REMAINING   APPLIED   RESETS IN
per-minute   5       5           -3        now
`
	if res.stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", res.stdout, want)
	}
}

// TestAdjustReplayed: an answer to a retry says that nothing changed now.
func TestAdjustReplayed(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, refundReplayedBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "refund", "orders", "bob", "3",
		"--request-id", "kubectl-0123")...)
	want := `refunded 3 to orders for caller 77aa01
replayed: an earlier request with this id already applied it; nothing changed now

LIMIT        QUOTA   REMAINING   APPLIED   RESETS IN
per-minute   5       4           3         12s
`
	if res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", res.code, res.stderr, res.stdout, want)
	}
}

// TestAdjustJSON: -o json prints the server's answer indented, and a generated request id
// on stderr (none for a given one).
func TestAdjustJSON(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, grantedBody)
	kubeconfig := tokenKubeconfig(t)
	res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "grant", "orders", "alice", "5", "-o", "json")...)
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
	if err := json.Unmarshal([]byte(grantedBody), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("printed %v, want the server's %v", got, want)
	}
	id := sentChange(t, srv.lastRequest(t)).RequestID
	if wantErr := "request id: " + id + " (repeat with --request-id to retry safely)\n"; !generatedID.MatchString(id) ||
		res.stderr != wantErr {
		t.Errorf("stderr %q, want %q", res.stderr, wantErr)
	}
	res = runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "grant", "orders", "alice", "5", "-o", "json",
		"--request-id", "r-1")...)
	if res.code != 0 || res.stderr != "" {
		t.Errorf("with --request-id: exit %d, stderr %q, want 0 and nothing", res.code, res.stderr)
	}
}

// TestAdjustBadAmount: N that is not a whole number from 1 to 1000000000 is refused, naming
// N, before anything is sent.
func TestAdjustBadAmount(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, grantedBody)
	kubeconfig := tokenKubeconfig(t)
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"grant", "orders", "alice", "0"}, `invalid N "0" (the last argument): want a whole number from 1 to 1000000000`},
		{[]string{"refund", "orders", "alice", "1000000001"}, `N "1000000001"`},
		{[]string{"grant", "orders", "alice", "1.5"}, `N "1.5"`},
		{[]string{"grant", "orders", "alice", "1e3"}, `N "1e3"`},
		{[]string{"refund", "orders", "alice", "--", "-5"}, `N "-5"`},
		{[]string{"grant", "orders", "--part", "acme", "five"}, `N "five"`},
		{[]string{"grant", "orders", "alice"}, `N "alice" (the last argument)`},
		{[]string{"refund", "orders", "alice", ""}, `N ""`},
		{[]string{"grant", "orders", "alice", "-5"}, "unknown shorthand flag"},
		{[]string{"refund", "orders"}, "accepts between 2 and 3 arg(s)"},
	} {
		res := runPlugin(t, srv.args(t, append([]string{"--kubeconfig", kubeconfig}, tc.args...)...)...)
		if res.code != 1 || !strings.Contains(res.stderr, tc.wantErr) || res.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, res.code, res.stdout, res.stderr, tc.wantErr)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestAdjustBadArguments: IDENTITY with --part, neither of them, an empty identity, an empty
// request id or one the server would refuse (over 256 bytes, or anything but printable ASCII
// without spaces) and a bad output format are refused before anything is sent.
func TestAdjustBadArguments(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, grantedBody)
	requireRefusedLocally(t, srv, []refusal{
		{[]string{"grant", "orders", "alice", "--part", "x", "5"}, "IDENTITY and --part are mutually exclusive"},
		{[]string{"reset", "orders", "alice", "--part", "x"}, "IDENTITY and --part are mutually exclusive"},
		{[]string{"reset", "orders"}, "no caller: give IDENTITY, or a composite identity's parts with --part"},
		{[]string{"refund", "orders", "5"}, "no caller"},
		{[]string{"reset", "orders", ""}, "IDENTITY is empty"},
		{[]string{"reset", "", "alice"}, "POLICY is empty"},
		{[]string{"reset", "orders", "alice", "--request-id", ""}, "--request-id is empty"},
		{[]string{"reset", "orders", "alice", "--request-id", "a\ngrant by system:admin"}, "--request-id: byte 1 is not printable ASCII"},
		{[]string{"reset", "orders", "alice", "--request-id", "ticket 42"}, "--request-id: byte 6 is not printable ASCII"},
		{[]string{"reset", "orders", "alice", "--request-id", "tü"}, "--request-id: byte 1"},
		{[]string{"reset", "orders", "alice", "--request-id", strings.Repeat("a", 257)}, "--request-id: at most 256 bytes, got 257"},
		{[]string{"grant", "orders", "alice", "5", "-o", "yaml"}, `--output "yaml"`},
		{[]string{"reset", "orders", "alice", "bob"}, "accepts between 1 and 2 arg(s)"},
	})
}

// TestAdjustServerErrors: any status but 200 is an error, exit 1, printed as "error:
// <status>: <the server's message>", never with the token. A generated request id is printed
// too when the change may have applied (5xx), not when it was refused.
func TestAdjustServerErrors(t *testing.T) {
	for _, tc := range []struct {
		status  int
		token   string
		body    string
		more    []string
		wantErr string
	}{
		{http.StatusUnauthorized, "another-token", "", nil, "error: 401 Unauthorized: the bearer token is not valid\n"},
		{http.StatusForbidden, testToken, `{"error":"alice may not update ratelimitpolicies/usage in namespace shop"}`, nil,
			"error: 403 Forbidden: alice may not update ratelimitpolicies/usage in namespace shop\n"},
		{http.StatusConflict, testToken, `{"error":"this request id was used for another adjustment"}`,
			[]string{"--request-id", "r-1"}, "error: 409 Conflict: this request id was used for another adjustment\n"},
		{http.StatusBadRequest, testToken, `{"error":"tier: policy orders has no tier gold"}`,
			[]string{"--request-id", "r-1", "--tier", "gold"}, "error: 400 Bad Request: tier: policy orders has no tier gold\n"},
		{http.StatusNotFound, testToken, `{"error":"no policy orders in namespace shop"}`, nil,
			"error: 404 Not Found: no policy orders in namespace shop\n"},
		{http.StatusServiceUnavailable, testToken, `{"error":"redis could not be asked: timeout"}`, nil,
			"request id: ID (repeat with --request-id to retry safely)\nerror: 503 Service Unavailable: redis could not be asked: timeout\n"},
		{http.StatusServiceUnavailable, testToken, `{"error":"redis could not be asked: timeout"}`, []string{"--request-id", "r-1"},
			"error: 503 Service Unavailable: redis could not be asked: timeout\n"},
	} {
		srv := newFakeUsageServer(t, tc.token, tc.status, tc.body)
		args := append([]string{"--kubeconfig", tokenKubeconfig(t), "grant", "orders", "alice", "5"}, tc.more...)
		res := runPlugin(t, srv.args(t, args...)...)
		wantErr := strings.Replace(tc.wantErr, "ID", sentChange(t, srv.lastRequest(t)).RequestID, 1)
		if res.code != 1 || res.stderr != wantErr || res.stdout != "" {
			t.Errorf("%d: exit %d, stdout %q, stderr %q; want 1 and %q", tc.status, res.code, res.stdout, res.stderr, wantErr)
		}
		if strings.Contains(res.stderr, testToken) {
			t.Errorf("%d: the token was printed: %q", tc.status, res.stderr)
		}
	}
}

// TestAdjustUnreachable: when the usage server cannot be called, the outcome is unknown, so a
// generated request id is printed with the error.
func TestAdjustUnreachable(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, grantedBody)
	args := srv.args(t, "--kubeconfig", tokenKubeconfig(t), "refund", "orders", "alice", "2")
	srv.Close()
	res := runPlugin(t, args...)
	lines := strings.Split(res.stderr, "\n")
	if res.code != 1 || len(lines) != 3 || !strings.HasPrefix(lines[1], "error: calling the usage server: ") {
		t.Fatalf("exit %d, stderr %q; want 1, the request id and the error", res.code, res.stderr)
	}
	id, hasPrefix := strings.CutPrefix(lines[0], "request id: ")
	id, hasSuffix := strings.CutSuffix(id, " (repeat with --request-id to retry safely)")
	if !hasPrefix || !hasSuffix || !generatedID.MatchString(id) {
		t.Errorf("first line %q, want the generated request id", lines[0])
	}
}
