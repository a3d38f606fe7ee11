package extauthz_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/extauthz"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

var remainingRE = regexp.MustCompile(`;r=(\d+);`)

// remaining is the r= of a RateLimit header, or -1.
func remaining(a answer) int {
	m := remainingRE.FindStringSubmatch(a.header["RateLimit"])
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestCheckBurstThenDeny(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 3))
	alice := request{path: "/api/orders/1?expand=items", header: []string{"X-API-Key", "alice"}}
	last := 3
	for i := range 3 {
		a := h.check(t, alice)
		wantOK(t, fmt.Sprint("request ", i+1), a, true)
		if r := remaining(a); r != last-1 {
			t.Errorf("request %d: remaining %d, want %d (%q)", i+1, r, last-1, a.header["RateLimit"])
		}
		last = remaining(a)
		if got := a.header["RateLimit-Policy"]; got != `"orders/per-minute";q=3;w=60` {
			t.Errorf("RateLimit-Policy %q", got)
		}
	}
	a := h.check(t, alice)
	want429(t, "request 4", a)
	if ra, err := strconv.Atoi(a.header["Retry-After"]); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want >= 1", a.header["Retry-After"])
	}
	if !strings.HasPrefix(a.header["RateLimit"], `"orders/per-minute";r=0;`) || a.header["RateLimit-Policy"] == "" {
		t.Errorf("denial headers %v", a.header)
	}
	if !strings.Contains(a.body, "policy orders") || strings.Contains(a.body, "alice") {
		t.Errorf("body %q: want the policy named, never the identity", a.body)
	}
	wantOK(t, "another identity", h.check(t, request{path: "/api/orders/1", header: []string{"X-API-Key", "bob"}}), true)
	wantOneDenialLogged(t, h, "orders", "alice")
}

// wantOneDenialLogged checks that the front logged exactly one denial by policy, never
// naming identity, and counted it in its metrics.
func wantOneDenialLogged(t *testing.T, h *harness, policy, identity string) {
	t.Helper()
	var denials int
	for _, l := range h.logs.All() {
		if strings.Contains(l, identity) {
			t.Errorf("log names the identity: %s", l)
		}
		if strings.Contains(l, `"rate limit denied"`) && strings.Contains(l, `"policy"="`+policy+`"`) && strings.Contains(l, `"front"="extauthz"`) {
			denials++
		}
	}
	if denials != 1 {
		t.Errorf("%d denials logged, want 1", denials)
	}
	if n := sidecartest.MetricValue(t, h.rig.Reg, "ratelimit_sidecar_decisions_total",
		map[string]string{"front": extauthz.FrontName, "policy": policy, "result": "denied"}); n != 1 {
		t.Errorf("denied decisions on front extauthz = %v, want 1", n)
	}
}

// TestCheckRoutes: policies decide by host, path and method; every spelling of a path is
// judged as that path; an unmatched request is admitted without headers; an encoded slash,
// and a host that is not a host name, are refused.
func TestCheckRoutes(t *testing.T) {
	h := start(t, limiter.Options{},
		sidecartest.Policy("reads", 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{"shop.example"}, PathPrefixes: []string{"/api"}, Methods: []v1alpha1.HTTPMethod{"GET"}}}
		}),
		sidecartest.Policy("writes", 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{"shop.example"}, PathPrefixes: []string{"/api"}, Methods: []v1alpha1.HTTPMethod{"POST"}}}
		}))
	judgedBy := func(a answer) string {
		p, _, _ := strings.Cut(strings.TrimPrefix(a.header["RateLimit"], `"`), "/")
		return p
	}
	if a := h.check(t, request{method: "GET", path: "/api/x", header: []string{"X-API-Key", "k1"}}); judgedBy(a) != "reads" {
		t.Errorf("GET: judged by %q (%v), want reads", judgedBy(a), a.header)
	}
	if a := h.check(t, request{method: "POST", path: "/api/x", header: []string{"X-API-Key", "k1"}}); judgedBy(a) != "writes" {
		t.Errorf("POST: judged by %q (%v), want writes", judgedBy(a), a.header)
	}
	wantOK(t, "another host", h.check(t, request{host: "admin.example:8443", path: "/api/x", header: []string{"X-API-Key", "k1"}}), false)
	wantOK(t, "unmatched path", h.check(t, request{path: "/public/x", header: []string{"X-API-Key", "k1"}}), false)
	wantOK(t, "unmatched method", h.check(t, request{method: "DELETE", path: "/api/x", header: []string{"X-API-Key", "k1"}}), false)
	for _, spelling := range []string{"//api/x", "/API/x", "/api/%78", "/api/./x?q=1", "/x/../api/x"} {
		key := "k-" + spelling
		wantOK(t, spelling, h.check(t, request{path: "/api/x", header: []string{"X-API-Key", key}}), true)
		want429(t, spelling+" after /api/x", h.check(t, request{path: spelling, header: []string{"X-API-Key", key}}))
	}
	want400(t, "encoded slash", h.check(t, request{path: "/api%2Fx", header: []string{"X-API-Key", "k2"}}))
	want400(t, "empty label in the host", h.check(t, request{host: "shop.example..", path: "/api/x", header: []string{"X-API-Key", "k2"}}))
	wantOK(t, "after the refusal", h.check(t, request{path: "/api/x", header: []string{"X-API-Key", "k2"}}), true)
}

// TestCheckRepeatedHeader: a header the limiter reads sent on two field lines is refused
// with 400 and debits nothing; a header it does not read may repeat.
func TestCheckRepeatedHeader(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	a := h.check(t, request{path: "/api/orders", header: []string{"X-API-Key", "alice", "X-API-Key", "mallory"}})
	want400(t, "repeated X-API-Key", a)
	if !strings.Contains(a.body, "X-Api-Key") && !strings.Contains(a.body, "X-API-Key") {
		t.Errorf("body %q does not name the header", a.body)
	}
	wantOK(t, "alice after the refusal", h.check(t, request{path: "/api/orders", header: []string{"X-API-Key", "alice", "Accept", "a", "Accept", "b"}}), true)
	wantOK(t, "mallory after the refusal", h.check(t, request{path: "/api/orders", header: []string{"X-API-Key", "mallory"}}), true)
}

// TestCheckHeadersMap: without header_map, Envoy's headers map (lower-case keys, repeated
// lines already joined) is read, its pseudo-headers dropped.
func TestCheckHeadersMap(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	req := func(key string) *authv3.CheckRequest {
		r := request{path: "/api/orders"}.proto(t)
		r.Attributes.Request.Http.HeaderMap = nil
		r.Attributes.Request.Http.Headers = map[string]string{":path": "/public", ":authority": "shop.example", "x-api-key": key}
		return r
	}
	for i, want := range []int{200, 429} {
		resp, err := h.call(t, req("alice"))
		if err != nil {
			t.Fatal(err)
		}
		if a := read(t, resp); a.status != want {
			t.Errorf("request %d: %d %v, want %d", i+1, a.status, a.header, want)
		}
	}
	resp, err := h.call(t, req("bob"))
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, "bob", read(t, resp), true)
}

// TestCheckPseudoHeadersAreNotRead: the path judged is the path field, whatever ":path" the
// header map carries, and ":authority" is no identity header.
func TestCheckPseudoHeadersAreNotRead(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	wantOK(t, "public path, :path on /api/orders", h.check(t, request{path: "/public",
		header: []string{":path", "/api/orders", "X-API-Key", "alice"}}), false)
	r := request{path: "/api/orders", header: []string{"X-API-Key", "alice"}}.proto(t)
	r.Attributes.Request.Http.HeaderMap.Headers[1].RawValue = []byte("/public") // Envoy's own :path
	resp, err := h.call(t, r)
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, "api path, :path /public", read(t, resp), true)
}

// TestCheckClientIP: a ClientIP identity is the source address (not its port); with
// trustedProxies it is read from X-Forwarded-For.
func TestCheckClientIP(t *testing.T) {
	ip := func(name string, trusted int32) *v1alpha1.RateLimitPolicy {
		return sidecartest.Policy(name, 1, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityClientIP, ClientIP: &v1alpha1.ClientIPSource{TrustedProxies: trusted}}}
		})
	}
	h := start(t, limiter.Options{}, ip("direct", 0), ip("proxied", 1))
	wantOK(t, "10.0.0.1", h.check(t, request{path: "/api/direct", source: "10.0.0.1:1111", header: []string{"X-Forwarded-For", "203.0.113.1"}}), true)
	want429(t, "10.0.0.1 from another port and XFF", h.check(t, request{path: "/api/direct", source: "10.0.0.1:2222", header: []string{"X-Forwarded-For", "203.0.113.2"}}))
	wantOK(t, "10.0.0.2", h.check(t, request{path: "/api/direct", source: "10.0.0.2:1111"}), true)

	wantOK(t, "XFF 203.0.113.7", h.check(t, request{path: "/api/proxied", source: "10.0.0.9:1", header: []string{"X-Forwarded-For", "198.51.100.1, 203.0.113.7"}}), true)
	want429(t, "XFF 203.0.113.7 via another proxy", h.check(t, request{path: "/api/proxied", source: "10.0.0.10:1", header: []string{"X-Forwarded-For", "203.0.113.7"}}))
	wantOK(t, "XFF 203.0.113.8", h.check(t, request{path: "/api/proxied", source: "10.0.0.9:1", header: []string{"X-Forwarded-For", "203.0.113.8"}}), true)
}

// TestCheckIdempotency: a request id replays (no debit) for the same method, host, path and
// query; the same id on another path or query debits.
func TestCheckIdempotency(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.IdempotentPolicy("pay", 4))
	req := func(path, id string) request {
		hdr := []string{"X-API-Key", "alice"}
		if id != "" {
			hdr = append(hdr, "Idempotency-Key", id)
		}
		return request{method: "POST", path: path, header: hdr}
	}
	for i := range 4 { // the first, then 3 replays (the default maxReplays): one debit
		wantOK(t, fmt.Sprint("replay ", i), h.check(t, req("/pay/a?x=1", "same")), true)
	}
	wantOK(t, "same id, another query", h.check(t, req("/pay/a?x=2", "same")), true)
	wantOK(t, "same id, another path", h.check(t, req("/pay/b?x=1", "same")), true)
	wantOK(t, "no id", h.check(t, req("/pay/c", "")), true)
	want429(t, "the fifth debit", h.check(t, req("/pay/d", "")))
}

// TestCheckPolicyEdit: a new snapshot is in force on the next Check.
func TestCheckPolicyEdit(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	alice := request{path: "/api/orders", header: []string{"X-API-Key", "alice"}}
	wantOK(t, "first", h.check(t, alice), true)
	want429(t, "second", h.check(t, alice))
	if err := h.rig.Store.Load(sidecartest.Doc(t, sidecartest.Policy("orders", 1, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match.HTTP[0].PathPrefixes = []string{"/v2"}
	})), "test"); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "old path after the edit", h.check(t, alice), false)
	// The policy keeps its name, so alice's counter carries over: another caller shows the new path.
	wantOK(t, "new path after the edit", h.check(t, request{path: "/v2/orders", header: []string{"X-API-Key", "bob"}}), true)
}

// TestCheckOnMissing: Reject denies without Retry-After; Skip admits without headers.
func TestCheckOnMissing(t *testing.T) {
	h := start(t, limiter.Options{},
		sidecartest.Policy("strict", 5, func(s *v1alpha1.RateLimitPolicySpec) { s.Identity.OnMissing = v1alpha1.MissingIdentityReject }),
		sidecartest.Policy("lax", 5, func(s *v1alpha1.RateLimitPolicySpec) { s.Identity.OnMissing = v1alpha1.MissingIdentitySkip }))
	a := h.check(t, request{path: "/api/strict"})
	want429(t, "Reject", a)
	if _, ok := a.header["Retry-After"]; ok || !strings.Contains(a.body, "requires an identity") {
		t.Errorf("Reject: %v %q, want no Retry-After and the reason", a.header, a.body)
	}
	wantOK(t, "Skip", h.check(t, request{path: "/api/lax"}), false)
}

// TestCheckErrors: no HTTP request is InvalidArgument; no snapshot is Unavailable.
func TestCheckErrors(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 1))
	for name, req := range map[string]*authv3.CheckRequest{
		"empty":   {},
		"no http": {Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{}}},
	} {
		if _, err := h.call(t, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	empty := &engine.Engine{Store: &engine.Store{Namespace: sidecartest.Namespace}}
	authz, _ := serve(t, empty, logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := authz.Check(ctx, request{path: "/api/orders", header: []string{"X-API-Key", "a"}}.proto(t))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("no snapshot: %v, want Unavailable", err)
	}
}

// TestOnePortBothFronts: RLS and ext_authz answer on the one gRPC server.
func TestOnePortBothFronts(t *testing.T) {
	h := start(t, limiter.Options{}, sidecartest.Policy("orders", 1),
		sidecartest.EnvoyPolicy("edge", "/e", 1, time.Minute))
	wantOK(t, "ext_authz", h.check(t, request{path: "/api/orders", header: []string{"X-API-Key", "a"}}), true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: sidecartest.EnvoyDomain,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
			{Key: "route", Value: "/e"}, {Key: "user", Value: "u"}}}}})
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() == nil {
		t.Errorf("RLS on the same port: %v %v", resp, err)
	}
}
