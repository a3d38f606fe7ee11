package extauthz_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/extauthz"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// fuzzService is a Service whose limiter points at a closed port, over policies with each
// failure mode, idempotency, a cost header, a ClientIP identity and a Reject.
func fuzzService(t testing.TB) *extauthz.Service {
	t.Helper()
	maxCost := int64(5)
	e := sidecartest.ClosedEngine(t,
		sidecartest.Policy("closed", 5, func(s *v1alpha1.RateLimitPolicySpec) { s.FailureMode = v1alpha1.FailureModeFailClosed }),
		sidecartest.Policy("open", 5, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP = []v1alpha1.HTTPMatch{{PathPrefixes: []string{"/"}, Methods: []v1alpha1.HTTPMethod{"POST"}}}
			s.Cost = &v1alpha1.Cost{Default: 1, Max: &maxCost, Header: "X-Cost"}
			s.Idempotency = &v1alpha1.Idempotency{Header: "Idempotency-Key", TTL: metav1.Duration{Duration: time.Minute}}
		}),
		sidecartest.Policy("ip", 5, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityClientIP, ClientIP: &v1alpha1.ClientIPSource{TrustedProxies: 2}}}
		}),
		sidecartest.Policy("strict", 5, func(s *v1alpha1.RateLimitPolicySpec) {
			s.Match.HTTP[0].Hosts = []string{"*.example"}
			s.Identity.OnMissing = v1alpha1.MissingIdentityReject
		}),
	)
	return extauthz.New(e, logr.Discard())
}

// fuzzRequest builds a CheckRequest from the fuzzed parts: header is "name: value" lines.
// flags: 1 header_map (else the headers map), 2 raw values, 4 a source address, 8 no HTTP
// request at all.
func fuzzRequest(method, host, path, header, source string, port uint32, flags uint8) *authv3.CheckRequest {
	if flags&8 != 0 {
		return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{}}
	}
	h := &authv3.AttributeContext_HttpRequest{Method: method, Host: host, Path: path}
	if flags&1 != 0 {
		h.HeaderMap = &corev3.HeaderMap{}
	} else {
		h.Headers = map[string]string{}
	}
	for _, line := range strings.Split(header, "\n") {
		name, value, _ := strings.Cut(line, ":")
		switch {
		case h.HeaderMap == nil:
			h.Headers[name] = value
		case flags&2 != 0:
			h.HeaderMap.Headers = append(h.HeaderMap.Headers, &corev3.HeaderValue{Key: name, RawValue: []byte(value)})
		default:
			h.HeaderMap.Headers = append(h.HeaderMap.Headers, &corev3.HeaderValue{Key: name, Value: value})
		}
	}
	attrs := &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: h}}
	if flags&4 != 0 {
		attrs.Source = &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: source, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}
	}
	return &authv3.CheckRequest{Attributes: attrs}
}

func FuzzCheckRequest(f *testing.F) {
	f.Add("GET", "shop.example:8443", "/api/closed?x=1", "x-api-key:alice", "10.0.0.1", uint32(443), uint8(5))
	f.Add("POST", "a.example", "/pay", "x-cost:3\nidempotency-key:k\nx-api-key:a", "::1", uint32(1), uint8(7))
	f.Add("POST", "a.example", "/pay", "x-cost:99\nx-cost:1", "", uint32(0), uint8(1))
	f.Add("GET", "b.example", "/api/strict", ":path:/x\n:authority:evil", "10.0.0.1", uint32(0), uint8(3))
	f.Add("GET", "b.example", "/api/ip", "x-forwarded-for:1.2.3.4, 5.6.7.8\nconnection:x-forwarded-for", "10.0.0.2", uint32(9), uint8(5))
	f.Add("GET", "h", "/api%2Fclosed", "", "", uint32(0), uint8(0))
	f.Add("OPTIONS", "h", "*", "", "", uint32(0), uint8(0))
	f.Add("", "", "", "", "", uint32(0), uint8(0))
	f.Add("GET", "h", "/", "", "", uint32(0), uint8(8))
	f.Add("\xff", "\xc3\x28", "/\xff\xfe?\x00", "\xff:\xfe", "\x00", uint32(1<<31), uint8(6))
	s := fuzzService(f)
	f.Fuzz(func(t *testing.T, method, host, path, header, source string, port uint32, flags uint8) {
		req := fuzzRequest(method, host, path, header, source, port, flags)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := s.Check(ctx, req)
		checkFuzzAnswer(t, req, resp, err)
	})
}

// checkFuzzAnswer checks what holds for every answer: InvalidArgument exactly for a request
// without HTTP attributes (the snapshot is loaded); otherwise OK with ok_response, or
// PERMISSION_DENIED 429 or INVALID_ARGUMENT 400 with denied_response; and the response
// always marshals (nothing of the caller's input, possibly invalid UTF-8, breaks it).
func checkFuzzAnswer(t *testing.T, req *authv3.CheckRequest, resp *authv3.CheckResponse, err error) {
	t.Helper()
	if req.GetAttributes().GetRequest().GetHttp() == nil {
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("no HTTP request answered %v, %v; want InvalidArgument", resp, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("error %v, want a decision", err)
	}
	code, ok, denied := codes.Code(resp.GetStatus().GetCode()), resp.GetOkResponse(), resp.GetDeniedResponse()
	switch {
	case code == codes.OK && ok != nil:
	case code == codes.PermissionDenied && denied.GetStatus().GetCode() == typev3.StatusCode_TooManyRequests:
	case code == codes.InvalidArgument && denied.GetStatus().GetCode() == typev3.StatusCode_BadRequest:
	default:
		t.Fatalf("answer %v", resp)
	}
	if _, err := proto.Marshal(resp); err != nil {
		t.Fatalf("response does not marshal: %v", err)
	}
}
