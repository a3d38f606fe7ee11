package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// Answers of the usage server to overviews.
const (
	topBody = `{"policy":"orders","callers":42,"denied":7,"deniedShare":0.16666666666666666,` +
		`"complete":false,"truncated":true,"continue":"YzEuMC40MjQy","examined":48000,"keys":1000000,"unreadable":3,"top":[` +
		`{"identityHash":"2bd806c97f0e00af","allowed":false,"limits":[` +
		`{"name":"per-minute","quota":5,"used":5,"remaining":0,"resetAfterMs":58473,"retryAfterMs":11873},` +
		`{"name":"per-day","quota":1000,"used":412,"remaining":588,"resetAfterMs":86399000,"retryAfterMs":0}]},` +
		`{"identityHash":"77aa01c3e5f90b12","tier":"gold","allowed":true,"limits":[` +
		`{"name":"per-minute","quota":50,"used":31,"remaining":19,"resetAfterMs":24000,"retryAfterMs":0}]}]}`
	topEmptyBody = `{"policy":"orders","tier":"gold","callers":0,"denied":0,"deniedShare":0,` +
		`"complete":true,"truncated":false,"examined":240,"keys":240,"top":[]}`
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

// TestTopTable: the overview, notes on the callers not read (a partial answer's coverage of
// the keyspace, digests), then a row per limit of each caller, the caller's columns on its
// first row only.
func TestTopTable(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, topBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders")...)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	want := `POLICY   CALLERS   DENIED      TIER
orders   42        7 (16.7%)   (each caller's own)
(partial: about 48,000 of the 1,000,000 keys in Redis examined (4.8%): more callers may hold counters; --all reads them all)
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

// pagedServer serves an overview in three parts: the first without continue, the second at
// continue=p2 (refused once as one too many, Retry-After 1), the last at continue=p3. Alice
// shows in the first and the last part (SCAN may return a key twice).
func pagedServer(t *testing.T) *fakeUsageServer {
	t.Helper()
	caller := func(hash string, used int) string {
		allowed := used < 10
		return fmt.Sprintf(`{"identityHash":%q,"allowed":%v,"limits":[{"name":"per-minute","quota":10,"used":%d,"remaining":%d,"resetAfterMs":1000,"retryAfterMs":0}]}`,
			hash, allowed, used, 10-used)
	}
	part := func(callers, denied int, complete bool, cont string, examined int, top ...string) string {
		return fmt.Sprintf(`{"policy":"orders","callers":%d,"denied":%d,"deniedShare":0.5,"complete":%v,"truncated":%v,"continue":%q,`+
			`"examined":%d,"keys":1200,"top":[%s]}`, callers, denied, complete, !complete, cont, examined, strings.Join(top, ","))
	}
	refused := false
	srv := newFakeUsageServer(t, testToken, http.StatusOK, "")
	srv.respond = func(q url.Values) (int, string, string) {
		switch q.Get("continue") {
		case "":
			return http.StatusOK, "", part(3, 1, false, "p2", 500, caller("aaaa000000000000", 10), caller("bbbb000000000000", 4), caller("cccc000000000000", 1))
		case "p2":
			if !refused {
				refused = true
				return http.StatusTooManyRequests, "1", `{"error":"usage overview: at most 1 overview a second each (a burst of 2)"}`
			}
			return http.StatusOK, "", part(1, 0, false, "p3", 500, caller("dddd000000000000", 7))
		case "p3":
			return http.StatusOK, "", part(2, 1, true, "", 500, caller("aaaa000000000000", 10), caller("eeee000000000000", 2))
		}
		return http.StatusBadRequest, "", `{"error":"continue: not a continuation of this server's overview"}`
	}
	return srv
}

// TestTopAllFollowsContinuations: --all asks part after part, passing each continuation and
// the other parameters unchanged, waits the Retry-After of a 429 and asks again, and prints
// the parts added up: 6 callers (alice, returned twice, counts in each part as the server
// counted her), 2 denied, the top callers of all parts ranked together with alice once, the
// keys examined capped at the keyspace, complete.
func TestTopAllFollowsContinuations(t *testing.T) {
	srv := pagedServer(t)
	start := time.Now()
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders", "--all", "--n", "3", "--tier", "gold", "-o", "json")...)
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("done in %v: the 429's Retry-After of 1 s was not waited", waited)
	}
	var got usage.Top
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, res.stdout)
	}
	var hashes []string
	for _, c := range got.Top {
		hashes = append(hashes, c.IdentityHash)
	}
	if got.Callers != 6 || got.Denied != 2 || !got.Complete || got.Truncated || got.Continue != "" || got.Examined != 1200 || got.Keys != 1200 ||
		!reflect.DeepEqual(hashes, []string{"aaaa000000000000", "dddd000000000000", "bbbb000000000000"}) {
		t.Errorf("added up: %+v (top %q)", got, hashes)
	}
	requireAskedInParts(t, srv)
}

// requireAskedInParts requires pagedServer asked for the first part, p2 twice (refused
// once) and p3, each with n=3 and tier=gold.
func requireAskedInParts(t *testing.T, srv *fakeUsageServer) {
	t.Helper()
	var conts []string
	for _, r := range srv.requests() {
		conts = append(conts, r.query.Get("continue"))
		if r.query.Get("n") != "3" || r.query.Get("tier") != "gold" {
			t.Errorf("a part asked with %v, want n=3 and tier=gold each time", r.query)
		}
	}
	if !reflect.DeepEqual(conts, []string{"", "p2", "p2", "p3"}) {
		t.Errorf("continuations sent %q, want the first part, p2 twice (refused once), p3", conts)
	}
}

// TestTopAllTable: the table of the parts added up has no partial note.
func TestTopAllTable(t *testing.T) {
	srv := pagedServer(t)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders", "--all", "--n", "2")...)
	want := `POLICY   CALLERS   DENIED      TIER
orders   6         2 (33.3%)   (each caller's own)

CALLER             TIER      DECISION   LIMIT        USED   QUOTA   FULL AGAIN IN
aaaa000000000000   default   denied     per-minute   10     10      1s
dddd000000000000   default   allowed    per-minute   7      10      1s
`
	if res.code != 0 || res.stdout != want {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", res.code, res.stderr, res.stdout, want)
	}
}

// TestTopTooManyRequests: without --all a 429 is an error naming when to try again; with
// --all the plugin waits and asks again, giving up after 30 refusals of one part.
func TestTopTooManyRequests(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, "")
	srv.respond = func(url.Values) (int, string, string) {
		return http.StatusTooManyRequests, "0", `{"error":"usage overview: an overview of yours is under way: one at a time"}`
	}
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders")...)
	want := "error: 429 Too Many Requests: usage overview: an overview of yours is under way: one at a time (retry after 0s)\n"
	if res.code != 1 || res.stderr != want {
		t.Errorf("exit %d, stderr %q; want 1 and %q", res.code, res.stderr, want)
	}
	res = runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders", "--all")...)
	if res.code != 1 || !strings.Contains(res.stderr, "429 Too Many Requests") || len(srv.requests()) != 1+1+maxTopRetries {
		t.Errorf("--all against a server refusing every request: exit %d, stderr %q, %d requests in all; want exit 1 after 1 + %d retries",
			res.code, res.stderr, len(srv.requests()), maxTopRetries)
	}
}

// TestTopOlderServer: a server from before continuations says truncated without coverage
// nor continuation: the note says callers were not read, and --all stops after one part.
func TestTopOlderServer(t *testing.T) {
	old := `{"policy":"orders","callers":5,"denied":0,"deniedShare":0,"truncated":true,"top":[]}`
	srv := newFakeUsageServer(t, testToken, http.StatusOK, old)
	res := runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "top", "orders", "--all")...)
	if res.code != 0 || !strings.Contains(res.stdout, "(more callers hold counters than were read: --all reads them all)") || len(srv.requests()) != 1 {
		t.Errorf("exit %d, %d requests, stdout:\n%s", res.code, len(srv.requests()), res.stdout)
	}
}
