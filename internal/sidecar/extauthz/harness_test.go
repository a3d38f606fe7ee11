package extauthz_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/envoyrls"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/extauthz"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/grpcserver"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// harness is the sidecar's gRPC server (RLS and ext_authz on one port, as cmd/sidecar
// serves them) on loopback over an engine on a real redis-server, and real grpc-go clients.
type harness struct {
	rig   *sidecartest.Rig
	authz authv3.AuthorizationClient
	rls   rlsv3.RateLimitServiceClient
	logs  *sidecartest.Logs
}

// start serves policies with a limiter built with opts.
func start(t *testing.T, opts limiter.Options, policies ...*v1alpha1.RateLimitPolicy) *harness {
	t.Helper()
	rig := sidecartest.Start(t, opts, policies...)
	log, logs := sidecartest.Logger()
	authz, rls := serve(t, rig.Engine, log)
	return &harness{rig: rig, authz: authz, rls: rls, logs: logs}
}

// serve serves e's fronts on one loopback gRPC listener and returns clients of both.
func serve(t *testing.T, e *engine.Engine, log logr.Logger) (authv3.AuthorizationClient, rlsv3.RateLimitServiceClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpcserver.New(envoyrls.New(e, log.WithName("envoy")), extauthz.New(e, log.WithName("extauthz")))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return authv3.NewAuthorizationClient(conn), rlsv3.NewRateLimitServiceClient(conn)
}

// request is a CheckRequest shaped as Envoy sends it with encode_raw_headers: host with a
// port, the path with its query, lower-case header names in header_map (pseudo-headers
// included), the source as a socket address with a port. header is name, value pairs.
type request struct {
	method, host, path string
	source             string // "ip:port"
	header             []string
}

func (r request) proto(t testing.TB) *authv3.CheckRequest {
	t.Helper()
	method, host := r.method, r.host
	if method == "" {
		method = "GET"
	}
	if host == "" {
		host = "shop.example:8443"
	}
	src := r.source
	if src == "" {
		src = "10.1.2.3:50000"
	}
	ip, port, err := net.SplitHostPort(src)
	if err != nil {
		t.Fatalf("source %q: %v", src, err)
	}
	var p uint32
	for _, c := range port {
		p = p*10 + uint32(c-'0')
	}
	hm := &corev3.HeaderMap{}
	add := func(k, v string) {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	add(":authority", host)
	add(":path", r.path)
	add(":method", method)
	add(":scheme", "https")
	for i := 0; i+1 < len(r.header); i += 2 {
		add(strings.ToLower(r.header[i]), r.header[i+1])
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "1", Method: method, Host: host, Path: r.path, Scheme: "https", Protocol: "HTTP/1.1", HeaderMap: hm,
		}},
	}}
}

// answer is a CheckResponse read back: the HTTP status Envoy would send (200 for OK), the
// headers (to the client on a denial, onto the upstream's response when OK), the body.
type answer struct {
	code   codes.Code
	status int
	header map[string]string
	body   string
}

// check sends req and fails the test on a gRPC error.
func (h *harness) check(t *testing.T, req request) answer {
	t.Helper()
	resp, err := h.call(t, req.proto(t))
	if err != nil {
		t.Fatalf("Check %s %s: %v", req.method, req.path, err)
	}
	return read(t, resp)
}

func (h *harness) call(t testing.TB, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.authz.Check(ctx, req)
}

// read checks that the response is well-formed and reads it.
func read(t testing.TB, resp *authv3.CheckResponse) answer {
	t.Helper()
	a := answer{code: codes.Code(resp.GetStatus().GetCode()), header: map[string]string{}}
	var hs []*corev3.HeaderValueOption
	switch {
	case resp.GetOkResponse() != nil:
		if a.code != codes.OK {
			t.Fatalf("ok_response with status %v", a.code)
		}
		a.status, hs = 200, resp.GetOkResponse().GetResponseHeadersToAdd()
		if len(resp.GetOkResponse().GetHeaders()) != 0 {
			t.Errorf("ok_response adds headers to the upstream request: %v", resp.GetOkResponse().GetHeaders())
		}
	case resp.GetDeniedResponse() != nil:
		d := resp.GetDeniedResponse()
		a.status, hs, a.body = int(d.GetStatus().GetCode()), d.GetHeaders(), d.GetBody()
		if a.code == codes.OK {
			t.Fatalf("denied_response with status OK")
		}
	default:
		t.Fatalf("neither ok_response nor denied_response: %v", resp)
	}
	for _, o := range hs {
		if o.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			t.Errorf("header %s: append_action %v, want OVERWRITE_IF_EXISTS_OR_ADD", o.GetHeader().GetKey(), o.GetAppendAction())
		}
		a.header[o.GetHeader().GetKey()] = o.GetHeader().GetValue()
	}
	return a
}

// want429 checks a rate-limit denial.
func want429(t *testing.T, what string, a answer) {
	t.Helper()
	if a.code != codes.PermissionDenied || a.status != int(typev3.StatusCode_TooManyRequests) ||
		a.header["Content-Type"] != "text/plain; charset=utf-8" || !strings.HasSuffix(a.body, "\n") {
		t.Errorf("%s: %v %d %v %q, want PERMISSION_DENIED, 429 text/plain", what, a.code, a.status, a.header, a.body)
	}
}

// wantOK checks an admission; judged says whether RateLimit headers are expected.
func wantOK(t *testing.T, what string, a answer, judged bool) {
	t.Helper()
	if a.code != codes.OK || a.status != 200 {
		t.Errorf("%s: %v %d %q, want OK", what, a.code, a.status, a.body)
		return
	}
	if got := a.header["RateLimit"] != "" && a.header["RateLimit-Policy"] != ""; got != judged {
		t.Errorf("%s: headers %v, want RateLimit headers: %v", what, a.header, judged)
	}
}

// want400 checks a refused request.
func want400(t *testing.T, what string, a answer) {
	t.Helper()
	if a.code != codes.InvalidArgument || a.status != int(typev3.StatusCode_BadRequest) || a.body == "" {
		t.Errorf("%s: %v %d %q, want INVALID_ARGUMENT, 400 with a reason", what, a.code, a.status, a.body)
	}
}
