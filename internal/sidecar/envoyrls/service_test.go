package envoyrls_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

const envoyDomain = sidecartest.EnvoyDomain

const (
	overLimit = rlsv3.RateLimitResponse_OVER_LIMIT
	codeOK    = rlsv3.RateLimitResponse_OK
)

// envoyHarness is a Service on a real gRPC server on loopback, backed by a real
// redis-server, and a real client.
type envoyHarness struct {
	t      testing.TB
	client rlsv3.RateLimitServiceClient
	store  *engine.Store
	reg    *prometheus.Registry
	logs   *sidecartest.Logs
}

// envoyStart serves policies with a limiter built with opts.
func envoyStart(t *testing.T, opts limiter.Options, policies ...*v1alpha1.RateLimitPolicy) *envoyHarness {
	t.Helper()
	rig := sidecartest.Start(t, opts, policies...)
	log, logs := sidecartest.Logger()
	es := &envoyrls.Service{Log: log, Engine: rig.Engine}
	return &envoyHarness{t: t, client: envoyServe(t, es), store: rig.Store, reg: rig.Reg, logs: logs}
}

// envoyServe serves es on a loopback gRPC listener and returns a client connected to it.
func envoyServe(t *testing.T, es *envoyrls.Service) rlsv3.RateLimitServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	g := grpc.NewServer()
	es.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// envoyDesc is a descriptor of key, value pairs.
func envoyDesc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// envoyReq is a request on domain "edge".
func envoyReq(hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: envoyDomain, Descriptors: ds, HitsAddend: hits}
}

// envoyCall sends req and fails the test on an error.
func (h *envoyHarness) envoyCall(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.GetDescriptors()))
	}
	return resp
}

// envoyCallErr sends req and returns the gRPC status of its error (OK when none).
func (h *envoyHarness) envoyCallErr(t *testing.T, req *rlsv3.RateLimitRequest) *status.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.client.ShouldRateLimit(ctx, req)
	return status.Convert(err)
}

// envoyHeader is the value of the response header name, or "".
func envoyHeader(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == name {
			return h.GetValue()
		}
	}
	return ""
}

// envoyDecisions is the decisions counter of one policy and result on the Envoy front.
func (h *envoyHarness) envoyDecisions(policyName, result, source string) float64 {
	return sidecartest.MetricValue(h.t, h.reg, "ratelimit_sidecar_decisions_total",
		map[string]string{"front": envoyrls.FrontName, "policy": policyName, "result": result, "source": source})
}

// envoyWantStatus checks a descriptor status: code, remaining, and the reset within
// [lo, hi].
func envoyWantStatus(t *testing.T, what string, st *rlsv3.RateLimitResponse_DescriptorStatus,
	code rlsv3.RateLimitResponse_Code, remaining uint32, lo, hi time.Duration) {
	t.Helper()
	if st.GetCode() != code || st.GetLimitRemaining() != remaining {
		t.Errorf("%s: code %v remaining %d, want %v remaining %d", what, st.GetCode(), st.GetLimitRemaining(), code, remaining)
	}
	if st.GetDurationUntilReset() == nil {
		t.Errorf("%s: no duration_until_reset", what)
		return
	}
	if d := st.GetDurationUntilReset().AsDuration(); d < lo || d > hi {
		t.Errorf("%s: duration_until_reset %v, want within [%v, %v]", what, d, lo, hi)
	}
}

// envoyWantLimit checks a descriptor's current_limit.
func envoyWantLimit(t *testing.T, what string, st *rlsv3.RateLimitResponse_DescriptorStatus,
	name string, perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit) {
	t.Helper()
	l := st.GetCurrentLimit()
	if l.GetName() != name || l.GetRequestsPerUnit() != perUnit || l.GetUnit() != unit {
		t.Errorf("%s: current_limit %q %d/%v, want %q %d/%v", what, l.GetName(), l.GetRequestsPerUnit(), l.GetUnit(), name, perUnit, unit)
	}
}

func TestEnvoyBurstThenOverLimit(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("api", "/api", 5, time.Minute))
	alice := envoyReq(0, envoyDesc("route", "/api", "user", "alice"))
	for i := range 5 {
		resp := h.envoyCall(t, alice)
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != codeOK {
			t.Fatalf("request %d: %v, want OK", i+1, resp.GetOverallCode())
		}
		// Each admitted request takes 12s of refill: the bucket is full again (i+1)*12s later.
		full := time.Duration(i+1) * 12 * time.Second
		envoyWantStatus(t, "admitted", st, codeOK, uint32(4-i), full-time.Second, full)
		envoyWantLimit(t, "admitted", st, "api/per-period", 5, rlsv3.RateLimitResponse_RateLimit_MINUTE)
		if got, want := envoyHeader(resp, ratelimitheaders.HeaderLimit), `"api/per-period";r=`; !strings.HasPrefix(got, want) {
			t.Errorf("RateLimit header %q, want prefix %q", got, want)
		}
	}
	resp := h.envoyCall(t, alice)
	if resp.GetOverallCode() != overLimit {
		t.Fatalf("6th request: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	st := resp.GetStatuses()[0]
	// Denied: duration_until_reset is the retry-after (one token, 12s), not the full refill.
	envoyWantStatus(t, "denied", st, overLimit, 0, 11*time.Second, 12*time.Second)
	envoyWantLimit(t, "denied", st, "api/per-period", 5, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	for name, want := range map[string]string{
		ratelimitheaders.HeaderPolicy:     `"api/per-period";q=5;w=60`,
		ratelimitheaders.HeaderLimit:      `"api/per-period";r=0;t=12`,
		ratelimitheaders.HeaderRetryAfter: "12",
	} {
		if got := envoyHeader(resp, name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	// Another identity has its own bucket.
	bob := h.envoyCall(t, envoyReq(0, envoyDesc("route", "/api", "user", "bob")))
	envoyWantStatus(t, "bob", bob.GetStatuses()[0], codeOK, 4, 11*time.Second, 12*time.Second)
	if envoyHeader(bob, ratelimitheaders.HeaderRetryAfter) != "" {
		t.Errorf("admitted response carries Retry-After")
	}
	if got := h.envoyDecisions("api", "denied", "Redis"); got != 1 {
		t.Errorf("denied decisions metric %v, want 1", got)
	}
}

func TestEnvoyDenialLogsNoIdentity(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("api", "/api", 1, time.Minute))
	req := envoyReq(0, envoyDesc("route", "/api", "user", "secret-api-key-123"))
	h.envoyCall(t, req)
	h.envoyCall(t, req)
	lines := h.logs.All()
	denied := 0
	for _, l := range lines {
		if strings.Contains(l, "secret-api-key-123") {
			t.Errorf("log line carries the identity: %s", l)
		}
		if strings.Contains(l, "rate limit denied") && strings.Contains(l, `"policy"="api"`) {
			denied++
		}
	}
	if denied != 1 {
		t.Errorf("%d denial log lines, want 1: %q", denied, lines)
	}
}

func TestEnvoyHitsAddendIsCost(t *testing.T) {
	maxCost := int64(20)
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("bulk", "/bulk", 10, time.Minute, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Cost = &v1alpha1.Cost{Default: 1, Max: &maxCost}
	}))
	desc := func() *ratelimitv3.RateLimitDescriptor { return envoyDesc("route", "/bulk", "user", "u") }
	remaining := func(resp *rlsv3.RateLimitResponse) uint32 { return resp.GetStatuses()[0].GetLimitRemaining() }

	if r := h.envoyCall(t, envoyReq(4, desc())); r.GetOverallCode() != codeOK || remaining(r) != 6 {
		t.Fatalf("hits_addend 4: %v remaining %d, want OK remaining 6", r.GetOverallCode(), remaining(r))
	}
	// More than the bucket can ever hold: denied, debits nothing, and no Retry-After (never).
	r := h.envoyCall(t, envoyReq(11, desc()))
	if r.GetOverallCode() != overLimit || remaining(r) != 6 {
		t.Fatalf("hits_addend 11: %v remaining %d, want OVER_LIMIT remaining 6", r.GetOverallCode(), remaining(r))
	}
	if ra := envoyHeader(r, ratelimitheaders.HeaderRetryAfter); ra != "" {
		t.Errorf("a cost above capacity got Retry-After %s; it can never succeed", ra)
	}
	// Above cost.max: refused, naming the policy, and nothing debited in any descriptor.
	other := envoyDesc("route", "/bulk", "user", "other")
	st := h.envoyCallErr(t, envoyReq(0, other, withHits(desc(), 21)))
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "bulk") {
		t.Fatalf("cost above cost.max: %v %q, want InvalidArgument naming policy bulk", st.Code(), st.Message())
	}
	if r := h.envoyCall(t, envoyReq(0, other)); remaining(r) != 9 {
		t.Errorf("descriptor of a refused request was debited: remaining %d, want 9", remaining(r))
	}
	// 0 is the default cost; a descriptor's own hits_addend overrides the request's.
	if r := h.envoyCall(t, envoyReq(0, desc())); remaining(r) != 5 {
		t.Errorf("hits_addend 0: remaining %d, want 5 (default cost 1)", remaining(r))
	}
	if r := h.envoyCall(t, envoyReq(3, withHits(desc(), 2))); remaining(r) != 3 {
		t.Errorf("descriptor hits_addend 2 over request 3: remaining %d, want 3", remaining(r))
	}
}

func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func TestEnvoyRefusesMalformed(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("api", "/api", 5, time.Minute))
	for _, c := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{envoyDesc("route", "/api")}}, "domain must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: envoyDomain}, "descriptors must not be empty"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: envoyDomain, Descriptors: envoyMany(65)}, "65 descriptors: at most 64 per request"},
	} {
		st := h.envoyCallErr(t, c.req)
		if st.Code() != codes.InvalidArgument || st.Message() != c.want {
			t.Errorf("%s: %v %q, want InvalidArgument %q", c.name, st.Code(), st.Message(), c.want)
		}
	}
	// A refund cannot be honoured by scripts that only debit.
	refund := envoyDesc("route", "/api", "user", "u")
	refund.IsNegativeHits = true
	if st := h.envoyCallErr(t, envoyReq(1, refund)); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "is_negative_hits") {
		t.Errorf("is_negative_hits: %v %q, want InvalidArgument naming it", st.Code(), st.Message())
	}
	// A domain no policy uses: every descriptor OK, no limits, no headers.
	resp := h.envoyCall(t, &rlsv3.RateLimitRequest{Domain: "elsewhere",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{envoyDesc("route", "/api"), envoyDesc("x", "y")}})
	if resp.GetOverallCode() != codeOK || len(resp.GetResponseHeadersToAdd()) != 0 {
		t.Errorf("unknown domain: %v with %d headers, want OK without headers", resp.GetOverallCode(), len(resp.GetResponseHeadersToAdd()))
	}
	for i, st := range resp.GetStatuses() {
		if st.GetCode() != codeOK || st.GetCurrentLimit() != nil {
			t.Errorf("unknown domain, descriptor %d: %v", i, st)
		}
	}
}

func TestEnvoyUnavailableBeforeSnapshot(t *testing.T) {
	es := &envoyrls.Service{Engine: &engine.Engine{Store: &engine.Store{Log: logr.Discard()}}}
	client := envoyServe(t, es)
	_, err := client.ShouldRateLimit(context.Background(), envoyReq(0, envoyDesc("route", "/api")))
	if st := status.Convert(err); st.Code() != codes.Unavailable {
		t.Fatalf("no snapshot: %v, want Unavailable", err)
	}
}

func TestEnvoyFixedIdentity(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("global", "/g", 2, time.Minute, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}}
	}))
	var got []rlsv3.RateLimitResponse_Code
	for _, user := range []string{"alice", "bob", "carol"} {
		got = append(got, h.envoyCall(t, envoyReq(0, envoyDesc("route", "/g", "user", user))).GetOverallCode())
	}
	if want := []rlsv3.RateLimitResponse_Code{codeOK, codeOK, overLimit}; !slices.Equal(got, want) {
		t.Errorf("three callers on one Fixed identity of 2: %v, want %v", got, want)
	}
}

func TestEnvoyDescriptorValueMatch(t *testing.T) {
	// "a-any" matches every route value (checked first: name order), "b-checkout" one value.
	h := envoyStart(t, limiter.Options{},
		sidecartest.EnvoyPolicy("a-any", "", 100, time.Minute),
		sidecartest.EnvoyPolicy("b-checkout", "/checkout", 1, time.Minute))
	checkout := envoyReq(0, envoyDesc("route", "/checkout", "user", "u"))
	first := h.envoyCall(t, checkout)
	// Both admitted; the reported limit is the tightest one.
	envoyWantLimit(t, "first checkout", first.GetStatuses()[0], "b-checkout/per-period", 1, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	if first.GetOverallCode() != codeOK || first.GetStatuses()[0].GetLimitRemaining() != 0 {
		t.Errorf("first checkout: %v", first.GetStatuses()[0])
	}
	if got := envoyHeader(first, ratelimitheaders.HeaderPolicy); !strings.Contains(got, "a-any/") || !strings.Contains(got, "b-checkout/") {
		t.Errorf("RateLimit-Policy %q does not list both policies", got)
	}
	second := h.envoyCall(t, checkout)
	if second.GetOverallCode() != overLimit {
		t.Errorf("second checkout: %v, want OVER_LIMIT", second.GetOverallCode())
	}
	envoyWantLimit(t, "second checkout", second.GetStatuses()[0], "b-checkout/per-period", 1, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	// Another value matches a-any only, which was debited by both checkout requests (it is
	// checked before the one that denied).
	search := h.envoyCall(t, envoyReq(0, envoyDesc("route", "/search", "user", "u")))
	st := search.GetStatuses()[0]
	envoyWantLimit(t, "search", st, "a-any/per-period", 100, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	if search.GetOverallCode() != codeOK || st.GetLimitRemaining() != 97 {
		t.Errorf("search: %v remaining %d, want OK remaining 97", search.GetOverallCode(), st.GetLimitRemaining())
	}
	// A descriptor without the route key matches neither.
	none := h.envoyCall(t, envoyReq(0, envoyDesc("user", "u")))
	if none.GetStatuses()[0].GetCurrentLimit() != nil || none.GetOverallCode() != codeOK {
		t.Errorf("descriptor without route: %v", none.GetStatuses()[0])
	}
}

func TestEnvoyMultipleDescriptors(t *testing.T) {
	h := envoyStart(t, limiter.Options{},
		sidecartest.EnvoyPolicy("login", "/login", 1, time.Minute),
		sidecartest.EnvoyPolicy("search", "/search", 100, time.Minute))
	req := envoyReq(0, envoyDesc("route", "/login", "user", "u"), envoyDesc("route", "/search", "user", "u"))
	if r := h.envoyCall(t, req); r.GetOverallCode() != codeOK {
		t.Fatalf("first: %v, want OK", r.GetOverallCode())
	}
	r := h.envoyCall(t, req)
	if r.GetOverallCode() != overLimit {
		t.Fatalf("second: %v, want OVER_LIMIT", r.GetOverallCode())
	}
	if c0, c1 := r.GetStatuses()[0].GetCode(), r.GetStatuses()[1].GetCode(); c0 != overLimit || c1 != codeOK {
		t.Errorf("statuses %v, %v; want OVER_LIMIT, OK", c0, c1)
	}
	if got := r.GetStatuses()[1].GetLimitRemaining(); got != 98 {
		t.Errorf("search remaining %d, want 98 (descriptors are decided independently)", got)
	}
	if got := envoyHeader(r, ratelimitheaders.HeaderLimit); !strings.Contains(got, `"login/per-period";r=0`) || !strings.Contains(got, `"search/per-period";r=98`) {
		t.Errorf("RateLimit header %q does not cover both descriptors", got)
	}
}

func TestEnvoyIdempotentRetry(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("pay", "/pay", 2, time.Minute, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Idempotency = &v1alpha1.Idempotency{DescriptorKey: "request_id", TTL: metav1.Duration{Duration: 10 * time.Minute}}
	}))
	call := func(id string) *rlsv3.RateLimitResponse_DescriptorStatus {
		return h.envoyCall(t, envoyReq(0, envoyDesc("route", "/pay", "user", "u", "request_id", id))).GetStatuses()[0]
	}
	for i := range 3 {
		if st := call("r1"); st.GetCode() != codeOK || st.GetLimitRemaining() != 1 {
			t.Fatalf("r1 attempt %d: %v remaining %d, want OK remaining 1 (retries never debit)", i+1, st.GetCode(), st.GetLimitRemaining())
		}
	}
	if st := call("r2"); st.GetCode() != codeOK || st.GetLimitRemaining() != 0 {
		t.Fatalf("r2: %v remaining %d, want OK remaining 0", st.GetCode(), st.GetLimitRemaining())
	}
	if st := call("r3"); st.GetCode() != overLimit {
		t.Fatalf("r3: %v, want OVER_LIMIT", st.GetCode())
	}
	if st := call("r1"); st.GetCode() != codeOK {
		t.Errorf("retry of r1 after the limit filled: %v, want its first decision (OK)", st.GetCode())
	}
}

func TestEnvoyShadowPolicy(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("trial", "/t", 1, time.Minute, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Shadow = true
	}))
	req := envoyReq(0, envoyDesc("route", "/t", "user", "u"))
	h.envoyCall(t, req)
	r := h.envoyCall(t, req)
	st := r.GetStatuses()[0]
	if r.GetOverallCode() != codeOK || st.GetCode() != codeOK {
		t.Fatalf("shadow policy over its limit: %v, want OK", r.GetOverallCode())
	}
	envoyWantLimit(t, "shadow", st, "trial/per-period", 1, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	if envoyHeader(r, ratelimitheaders.HeaderRetryAfter) != "" {
		t.Errorf("a shadowed denial sent Retry-After")
	}
	if got := h.envoyDecisions("trial", "shadow_denied", "Redis"); got != 1 {
		t.Errorf("shadow_denied decisions %v, want 1", got)
	}
	if got := h.envoyDecisions("trial", "allowed", "Redis"); got != 1 {
		t.Errorf("allowed decisions %v, want 1", got)
	}
	if got := h.envoyDecisions("trial", "denied", "Redis"); got != 0 {
		t.Errorf("denied decisions %v, want 0 (a shadow policy never denies)", got)
	}
}

func TestEnvoyMissingIdentity(t *testing.T) {
	onMissing := func(a v1alpha1.MissingIdentityAction) func(*v1alpha1.RateLimitPolicySpec) {
		return func(s *v1alpha1.RateLimitPolicySpec) { s.Identity.OnMissing = a }
	}
	h := envoyStart(t, limiter.Options{},
		sidecartest.EnvoyPolicy("reject", "/r", 5, time.Minute, onMissing(v1alpha1.MissingIdentityReject)),
		sidecartest.EnvoyPolicy("skip", "/s", 5, time.Minute, onMissing(v1alpha1.MissingIdentitySkip)))
	if r := h.envoyCall(t, envoyReq(0, envoyDesc("route", "/r"))); r.GetOverallCode() != overLimit {
		t.Errorf("Reject without identity: %v, want OVER_LIMIT", r.GetOverallCode())
	}
	if r := h.envoyCall(t, envoyReq(0, envoyDesc("route", "/r", "user", "u"))); r.GetOverallCode() != codeOK {
		t.Errorf("Reject with identity: %v, want OK", r.GetOverallCode())
	}
	r := h.envoyCall(t, envoyReq(0, envoyDesc("route", "/s")))
	if r.GetOverallCode() != codeOK || r.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Errorf("Skip without identity: %v, want OK without a limit", r.GetStatuses()[0])
	}
	if got := h.envoyDecisions("reject", "rejected", "none"); got != 1 {
		t.Errorf("rejected decisions %v, want 1", got)
	}
	if got := h.envoyDecisions("skip", "skipped", "none"); got != 1 {
		t.Errorf("skipped decisions %v, want 1", got)
	}
}

// TestEnvoyReportsReloadedLimits: the reported limits are kept per snapshot, so a reload
// that changes a policy reports its new limit, and one that keeps it the same one.
func TestEnvoyReportsReloadedLimits(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("api", "/api", 5, time.Minute),
		sidecartest.EnvoyPolicy("other", "/other", 3, time.Minute))
	call := func(route string) *rlsv3.RateLimitResponse_DescriptorStatus {
		return h.envoyCall(t, envoyReq(0, envoyDesc("route", route, "user", "u"))).GetStatuses()[0]
	}
	envoyWantLimit(t, "before the reload", call("/api"), "api/per-period", 5, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	if err := h.store.Load(sidecartest.Doc(t, sidecartest.EnvoyPolicy("api", "/api", 7, time.Second),
		sidecartest.EnvoyPolicy("other", "/other", 3, time.Minute)), "reload"); err != nil {
		t.Fatal(err)
	}
	envoyWantLimit(t, "changed policy", call("/api"), "api/per-period", 7, rlsv3.RateLimitResponse_RateLimit_SECOND)
	envoyWantLimit(t, "unchanged policy", call("/other"), "other/per-period", 3, rlsv3.RateLimitResponse_RateLimit_MINUTE)
}

func TestEnvoyRateLimitUnits(t *testing.T) {
	burst := int64(150)
	cases := []struct {
		route    string
		requests int64
		period   time.Duration
		edit     func(*v1alpha1.RateLimitPolicySpec)
		perUnit  uint32
		unit     rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{"s", 3, time.Second, nil, 3, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{"sub-second", 5, 500 * time.Millisecond, nil, 10, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{"ninety", 10, 90 * time.Second, nil, 6, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{"burst", 100, time.Hour, func(s *v1alpha1.RateLimitPolicySpec) { s.Limits[0].Burst = &burst }, 150, rlsv3.RateLimitResponse_RateLimit_HOUR},
		{"two-days", 1, 48 * time.Hour, nil, 1, rlsv3.RateLimitResponse_RateLimit_DAY},
		{"week", 7000, 7 * 24 * time.Hour, nil, 1000, rlsv3.RateLimitResponse_RateLimit_DAY},
	}
	var policies []*v1alpha1.RateLimitPolicy
	for _, c := range cases {
		var edits []func(*v1alpha1.RateLimitPolicySpec)
		if c.edit != nil {
			edits = append(edits, c.edit)
		}
		policies = append(policies, sidecartest.EnvoyPolicy("p-"+c.route, c.route, c.requests, c.period, edits...))
	}
	h := envoyStart(t, limiter.Options{}, policies...)
	for _, c := range cases {
		r := h.envoyCall(t, envoyReq(0, envoyDesc("route", c.route, "user", "u")))
		envoyWantLimit(t, c.route, r.GetStatuses()[0], "p-"+c.route+"/per-period", c.perUnit, c.unit)
	}
}

func TestEnvoyDenyCacheAndPipelining(t *testing.T) {
	h := envoyStart(t, limiter.Options{Pipelining: true, DenyCacheSize: 100}, sidecartest.EnvoyPolicy("api", "/api", 1, time.Minute))
	req := envoyReq(0, envoyDesc("route", "/api", "user", "hot"))
	h.envoyCall(t, req)
	h.envoyCall(t, req) // denied by Redis; remembered
	for range 3 {
		r := h.envoyCall(t, req)
		envoyWantStatus(t, "cached denial", r.GetStatuses()[0], overLimit, 0, 50*time.Second, time.Minute)
		envoyWantLimit(t, "cached denial", r.GetStatuses()[0], "api/per-period", 1, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	}
	if got := h.envoyDecisions("api", "denied", "DenyCache"); got != 3 {
		t.Errorf("deny cache decisions %v, want 3", got)
	}
}

// envoyMany is n copies of one matching descriptor.
func envoyMany(n int) []*ratelimitv3.RateLimitDescriptor {
	out := make([]*ratelimitv3.RateLimitDescriptor, n)
	for i := range out {
		out[i] = envoyDesc("route", "/api", "user", "u")
	}
	return out
}

// An idempotency key must not be a free pass: one request id sent in 12 different
// descriptors was admitted 12 times with 3 per minute.
func TestEnvoyIdempotencyBindsToDescriptor(t *testing.T) {
	pol := sidecartest.Policy("rls", 3, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Match = v1alpha1.Match{Envoy: &v1alpha1.EnvoyMatch{Domain: "edge", Descriptors: []v1alpha1.DescriptorMatch{{Key: "path"}}}}
		s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityDescriptor, Descriptor: &v1alpha1.DescriptorSource{Key: "user"}}}
		s.Idempotency = &v1alpha1.Idempotency{DescriptorKey: "request_id", TTL: metav1.Duration{Duration: time.Minute}}
	})
	rig := sidecartest.Start(t, limiter.Options{}, pol)
	srv := &envoyrls.Service{Engine: rig.Engine}
	over := 0
	for i := range 12 {
		resp, err := srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
				{Key: "path", Value: fmt.Sprintf("/p%d", i)}, {Key: "user", Value: "alice"}, {Key: "request_id", Value: "same"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			over++
		}
	}
	if over != 9 {
		t.Errorf("one request id on 12 different descriptors: %d over the limit, want 9 (3 admitted)", over)
	}
}

// TestEnvoyPeekDescriptor: a descriptor whose own hits_addend is 0 is a peek: decided at the
// policy's default cost, debiting nothing, counted as a peek and not as a decision. Fifty
// peeks leave all 10 of a limit; a peek beside a real hit in one request sees the hit
// debited and itself not; once the limit is spent a peek says OVER_LIMIT with 0 remaining,
// as the real hit after it is denied.
func TestEnvoyPeekDescriptor(t *testing.T) {
	h := envoyStart(t, limiter.Options{}, sidecartest.EnvoyPolicy("api", "/api", 10, time.Minute))
	desc := func() *ratelimitv3.RateLimitDescriptor { return envoyDesc("route", "/api", "user", "u") }
	peek := func() *ratelimitv3.RateLimitDescriptor { return withHits(desc(), 0) }
	for i := range 50 {
		r := h.envoyCall(t, envoyReq(0, peek()))
		envoyWantStatus(t, fmt.Sprintf("peek %d", i), r.GetStatuses()[0], codeOK, 10, 0, time.Minute)
	}
	r := h.envoyCall(t, envoyReq(0, desc(), peek()))
	envoyWantStatus(t, "the hit beside a peek", r.GetStatuses()[0], codeOK, 9, 0, time.Minute)
	envoyWantStatus(t, "the peek beside a hit", r.GetStatuses()[1], codeOK, 9, 0, time.Minute)
	for range 9 {
		h.envoyCall(t, envoyReq(0, desc()))
	}
	r = h.envoyCall(t, envoyReq(0, peek()))
	envoyWantStatus(t, "peek once spent", r.GetStatuses()[0], overLimit, 0, time.Second, time.Minute)
	if r.GetOverallCode() != overLimit {
		t.Errorf("peek once spent: overall %v, want OVER_LIMIT", r.GetOverallCode())
	}
	if r := h.envoyCall(t, envoyReq(0, desc())); r.GetOverallCode() != overLimit {
		t.Errorf("the 11th hit: %v, want OVER_LIMIT", r.GetOverallCode())
	}
	peeks := sidecartest.MetricValue(h.t, h.reg, "ratelimit_sidecar_peeks_total",
		map[string]string{"front": envoyrls.FrontName, "policy": "api", "result": "allowed"})
	allowed := h.envoyDecisions("api", "allowed", "Redis")
	if peeks != 51 || allowed != 10 {
		t.Errorf("metrics: %v allowed peeks and %v allowed decisions, want 51 and 10", peeks, allowed)
	}
}
