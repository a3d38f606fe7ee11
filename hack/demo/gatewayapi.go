package main

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
	"github.com/ratelimit-dev/ratelimit-operator/hack/pinnedmod"
)

//go:embed gatewayapi.yaml
var gatewayAPIObjects []byte

// gatewayAPIModule ships the Gateway API CRDs, at the version hack/gatewaycrds/go.mod pins.
const gatewayAPIModule = "sigs.k8s.io/gateway-api"

// withGatewayAPI installs Gateway API's standard-channel CRDs into the control plane, from
// the pinned module (the module cache; no download when it is warm).
func withGatewayAPI() (func(*envtest.Environment), error) {
	dirs, err := pinnedmod.Download(filepath.Join(controlplane.RepoRoot(), "hack", "gatewaycrds"), gatewayAPIModule)
	if err != nil {
		return nil, fmt.Errorf("gateway API CRDs: %w", err)
	}
	crds := filepath.Join(dirs[gatewayAPIModule], "config", "crd", "standard")
	return func(e *envtest.Environment) { e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, crds) }, nil
}

// gatewayAPI attaches a policy to an HTTPRoute and sends requests to the sidecar's ext_authz
// front as a gateway (Envoy Gateway, Istio) would: the route's host and path are limited,
// another host is not.
func (d *demo) gatewayAPI(ctx context.Context) error {
	d.step("Gateway API: a policy attached to an HTTPRoute (targetRefs), enforced through ext_authz")
	ns := d.opts.namespace
	if out, err := d.kubectl(ctx, gatewayAPIObjects, "apply", "-n", ns, "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply gateway objects: %w\n%s", err, out)
	}
	if out, err := d.kubectl(ctx, nil, "wait", "-n", ns, "--for=condition=Ready", "rlp/checkout", "--timeout=60s"); err != nil {
		return fmt.Errorf("policy checkout not Ready: %w\n%s", err, out)
	}
	out, err := d.kubectl(ctx, nil, "get", "rlp", "checkout", "-n", ns, "-o",
		`jsonpath={range .status.ancestors[*]}{.ancestorRef.kind}/{.ancestorRef.name}: {range .conditions[*]}{.type}={.status} ({.message}) {end}{"\n"}{end}`)
	if err != nil {
		return fmt.Errorf("kubectl get rlp checkout: %w\n%s", err, out)
	}
	d.sayBlock(out)
	authz, closeConn, err := d.extAuthz()
	if err != nil {
		return err
	}
	defer closeConn()
	if err := d.waitRouteLimited(ctx, authz); err != nil {
		return err
	}
	codes := make([]int, 4)
	for i := range codes {
		if codes[i], err = checkAuthz(ctx, authz, "shop.demo.example", "/checkout/pay", "dave"); err != nil {
			return err
		}
	}
	other, err := checkAuthz(ctx, authz, "blog.demo.example", "/checkout/pay", "erin")
	if err != nil {
		return err
	}
	d.say("shop.demo.example/checkout/pay: %v; blog.demo.example/checkout/pay: %d", codes, other)
	if fmt.Sprint(codes) != "[200 200 200 429]" || other != 200 {
		return fmt.Errorf("ext_authz answered %v for the route and %d for another host, want 3×200 then 429, and 200", codes, other)
	}
	d.done("gateway API: policy attached to HTTPRoute shop, through ext_authz 200 ×3 then 429 on its host, 200 on another")
	return nil
}

// extAuthz dials the sidecar's gRPC port (ext_authz and RLS).
func (d *demo) extAuthz() (authv3.AuthorizationClient, func(), error) {
	conn, err := grpc.NewClient(d.addrs.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("dial sidecar gRPC %s: %w", d.addrs.grpc, err)
	}
	return authv3.NewAuthorizationClient(conn), func() { _ = conn.Close() }, nil
}

// waitRouteLimited waits until the sidecar has loaded the snapshot carrying the attached
// policy: an admitted request on the route then reports the policy's RateLimit headers.
func (d *demo) waitRouteLimited(ctx context.Context, authz authv3.AuthorizationClient) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := authz.Check(ctx, checkRequest("shop.demo.example", "/checkout", "probe"))
		if err == nil && hasPolicyHeader(resp, "checkout") {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the sidecar did not enforce policy checkout within 20s")
}

// hasPolicyHeader reports whether an admitted answer names policy in its RateLimit-Policy header.
func hasPolicyHeader(resp *authv3.CheckResponse, policy string) bool {
	for _, h := range resp.GetOkResponse().GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetHeader().GetKey(), "RateLimit-Policy") && strings.Contains(h.GetHeader().GetValue(), `"`+policy+`/`) {
			return true
		}
	}
	return false
}

// checkAuthz asks about one request and returns the HTTP status the gateway would send.
func checkAuthz(ctx context.Context, authz authv3.AuthorizationClient, host, path, key string) (int, error) {
	resp, err := authz.Check(ctx, checkRequest(host, path, key))
	if err != nil {
		return 0, fmt.Errorf("ext_authz Check %s%s: %w", host, path, err)
	}
	if den := resp.GetDeniedResponse(); den != nil {
		return int(den.GetStatus().GetCode()), nil
	}
	return 200, nil
}

// checkRequest is a CheckRequest as Envoy sends it.
func checkRequest(host, path, key string) *authv3.CheckRequest {
	hm := &corev3.HeaderMap{}
	for _, kv := range [][2]string{{":authority", host}, {":path", path}, {":method", "GET"}, {"x-api-key", key}} {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Host: host, Path: path, Scheme: "http",
			Protocol: "HTTP/1.1", HeaderMap: hm}}}}
}
