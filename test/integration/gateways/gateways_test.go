package gateways_test

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// The gateway manifests, relative to the repository's root.
const (
	istioDir        = "config/gateways/istio"
	istioMeshConfig = "config/gateways/istio/mesh-config.yaml"
	envoyGatewayDir = "config/gateways/envoy-gateway"
	referenceGrant  = "config/gateways/envoy-gateway/referencegrant.yaml"
	ingressNginxDir = "config/gateways/ingress-nginx"
	traefikDir      = "config/gateways/traefik"

	// appNamespace is the namespace the gateway manifests assume config/service runs in.
	appNamespace = "apps"
)

// serviceHost is the cluster DNS name of config/service's Service in appNamespace.
const serviceHost = serviceName + "." + appNamespace + ".svc.cluster.local"

// checkServiceURL: raw is http://<the Service>:<port>/<path>?<query>, with port the
// Service's forward-auth port.
func checkServiceURL(t *testing.T, what, raw, path, query string) {
	t.Helper()
	r := renderService(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s %q: %v", what, raw, err)
	}
	port := strconv.Itoa(int(r.servicePort(t, forwardAuthName).Port))
	if u.Scheme != "http" || u.Hostname() != serviceHost || u.Port() != port || u.Path != path || u.RawQuery != query {
		t.Errorf("%s %q: want http://%s:%s%s?%s", what, raw, serviceHost, port, path, query)
	}
}

// meshProvider is the one extension provider of config/gateways/istio/mesh-config.yaml,
// after checking it and its envoyExtAuthzGrpc use only fields istio.io/api declares.
type meshProvider struct {
	Name  string `json:"name"`
	Authz struct {
		Service  string `json:"service"`
		Port     int32  `json:"port"`
		Timeout  string `json:"timeout"`
		FailOpen bool   `json:"failOpen"`
	} `json:"envoyExtAuthzGrpc"`
}

func readMeshProvider(t *testing.T) meshProvider {
	t.Helper()
	raw := readManifest(t, istioMeshConfig)
	if len(raw) != 1 {
		t.Fatalf("%s holds %d documents, want 1", istioMeshConfig, len(raw))
	}
	var values struct {
		MeshConfig struct {
			ExtensionProviders []map[string]any `json:"extensionProviders"`
		} `json:"meshConfig"`
	}
	b, err := yaml.Marshal(raw[0].Object)
	if err == nil {
		err = yaml.UnmarshalStrict(b, &values)
	}
	if err != nil {
		t.Fatalf("%s: %v", istioMeshConfig, err)
	}
	providers := values.MeshConfig.ExtensionProviders
	if len(providers) != 1 {
		t.Fatalf("%d extension providers, want 1", len(providers))
	}
	checkProtoFields(t, "MeshConfig", map[string]any{"extensionProviders": providers})
	checkProtoFields(t, "ExtensionProvider", providers[0])
	authz, _ := providers[0]["envoyExtAuthzGrpc"].(map[string]any)
	checkProtoFields(t, "EnvoyExternalAuthorizationGrpcProvider", authz)
	var p meshProvider
	if b, err = yaml.Marshal(providers[0]); err == nil {
		err = yaml.Unmarshal(b, &p)
	}
	if err != nil {
		t.Fatalf("decode provider: %v", err)
	}
	return p
}

// TestIstioProviderNamesTheService: the mesh config's provider is an envoyExtAuthzGrpc one
// pointing at the Service's gRPC port, with only fields istio.io/api's MeshConfig declares,
// and the AuthorizationPolicy sends the ingress gateway's requests to that provider.
func TestIstioProviderNamesTheService(t *testing.T) {
	r := renderService(t)
	provider := readMeshProvider(t)
	grpcPort := r.servicePort(t, grpcPortName).Port
	if provider.Authz.Service != serviceHost || provider.Authz.Port != grpcPort {
		t.Errorf("provider %+v: want %s port %d", provider, serviceHost, grpcPort)
	}
	if d, err := time.ParseDuration(provider.Authz.Timeout); err != nil || d <= 50*time.Millisecond {
		t.Errorf("provider timeout %q (%v): want a duration above the service's 50ms Redis timeout", provider.Authz.Timeout, err)
	}

	var ap struct {
		Metadata struct{ Namespace string }
		Spec     struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			}
			Action   string
			Provider struct{ Name string }
			Rules    []map[string]any
		}
	}
	render(t, istioDir).decode(t, "AuthorizationPolicy", "ratelimit", &ap)
	if ap.Spec.Action != "CUSTOM" || provider.Name == "" || ap.Spec.Provider.Name != provider.Name {
		t.Errorf("authorization policy action %s provider %q: want CUSTOM with the mesh config's provider %q", ap.Spec.Action, ap.Spec.Provider.Name, provider.Name)
	}
	if ap.Metadata.Namespace != "istio-system" || ap.Spec.Selector.MatchLabels["istio"] != "ingressgateway" || len(ap.Spec.Rules) != 1 {
		t.Errorf("authorization policy %+v: want one rule for the ingress gateway in istio-system", ap)
	}
}

// objectRef is the fields of a Gateway API reference the tests read.
type objectRef struct {
	Group, Kind, Name, Namespace string
	Port                         *int32
}

// TestEnvoyGatewayPolicyNamesTheService: the SecurityPolicy's ext_authz backend is the
// Service's gRPC port in its own namespace, and it targets the route shipped beside it.
func TestEnvoyGatewayPolicyNamesTheService(t *testing.T) {
	r := renderService(t)
	m := render(t, envoyGatewayDir)
	var sp struct {
		Spec struct {
			TargetRefs []objectRef `json:"targetRefs"`
			ExtAuth    struct {
				GRPC *struct {
					BackendRefs []objectRef `json:"backendRefs"`
				} `json:"grpc"`
				HTTP any `json:"http"`
			} `json:"extAuth"`
		}
	}
	m.decode(t, "SecurityPolicy", "ratelimit", &sp)
	grpc := sp.Spec.ExtAuth.GRPC
	if grpc == nil || sp.Spec.ExtAuth.HTTP != nil || len(grpc.BackendRefs) != 1 {
		t.Fatalf("extAuth %+v: want one gRPC backend", sp.Spec.ExtAuth)
	}
	grpcPort := r.servicePort(t, grpcPortName).Port
	if b := grpc.BackendRefs[0]; !refersToService(b, r.svc.Name, grpcPort) {
		t.Errorf("backendRef %+v: want Service %s port %d in the policy's namespace", b, r.svc.Name, grpcPort)
	}
	if len(sp.Spec.TargetRefs) != 1 {
		t.Fatalf("targetRefs %+v: want one", sp.Spec.TargetRefs)
	}
	if tr := sp.Spec.TargetRefs[0]; tr.Group != "gateway.networking.k8s.io" || tr.Kind != "HTTPRoute" || m.find("HTTPRoute", tr.Name) == nil {
		t.Errorf("targetRef %+v: want the HTTPRoute shipped beside it", tr)
	}
}

// refersToService reports whether ref is the core Service name, port port, of the referrer's
// namespace.
func refersToService(ref objectRef, name string, port int32) bool {
	return ref.Group == "" && (ref.Kind == "" || ref.Kind == "Service") && ref.Name == name &&
		ref.Namespace == "" && ref.Port != nil && *ref.Port == port
}

// TestEnvoyGatewayReferenceGrant: the optional ReferenceGrant lets SecurityPolicies of
// appNamespace refer to config/service's Service.
func TestEnvoyGatewayReferenceGrant(t *testing.T) {
	r := renderService(t)
	var grant struct {
		Spec struct {
			From []objectRef
			To   []objectRef
		}
	}
	readManifest(t, referenceGrant).decode(t, "ReferenceGrant", "ratelimit-service-from-securitypolicies", &grant)
	if len(grant.Spec.From) != 1 || len(grant.Spec.To) != 1 {
		t.Fatalf("reference grant %+v: want one from and one to", grant.Spec)
	}
	from, to := grant.Spec.From[0], grant.Spec.To[0]
	if from.Group != "gateway.envoyproxy.io" || from.Kind != "SecurityPolicy" || from.Namespace != appNamespace {
		t.Errorf("reference grant from %+v: want SecurityPolicies of %s", from, appNamespace)
	}
	if to.Group != "" || to.Kind != "Service" || to.Name != r.svc.Name {
		t.Errorf("reference grant to %+v: want Service %s", to, r.svc.Name)
	}
}

// TestIngressNginxAuthURL: the Ingress's auth-url is the Service's /v1/auth-request on the
// forward-auth port, stating the host nginx routed on (?host=$host: X-Original-URL carries
// the Host header, which an absolute request target overrides), and the RateLimit headers
// reach the upstream.
func TestIngressNginxAuthURL(t *testing.T) {
	var ing networkingv1.Ingress
	render(t, ingressNginxDir).decode(t, "Ingress", "echo", &ing)
	checkServiceURL(t, "auth-url", ing.Annotations["nginx.ingress.kubernetes.io/auth-url"], "/v1/auth-request", "host=$host")
	headers := strings.Split(ing.Annotations["nginx.ingress.kubernetes.io/auth-response-headers"], ",")
	for _, h := range []string{"RateLimit", "RateLimit-Policy"} {
		if !slices.Contains(headers, h) {
			t.Errorf("auth-response-headers %q lack %s", headers, h)
		}
	}
	if _, cached := ing.Annotations["nginx.ingress.kubernetes.io/auth-cache-key"]; cached {
		t.Errorf("auth-cache-key set: cached answers would admit requests without counting them")
	}
}

// TestTraefikForwardAuthAddress: the Middleware's forwardAuth address is the Service's
// /v1/forward-auth on the forward-auth port, it does not trust the client's X-Forwarded-*,
// and the RateLimit headers reach the upstream.
func TestTraefikForwardAuthAddress(t *testing.T) {
	var mw struct {
		Spec struct {
			ForwardAuth struct {
				Address             string   `json:"address"`
				TrustForwardHeader  bool     `json:"trustForwardHeader"`
				AuthResponseHeaders []string `json:"authResponseHeaders"`
			} `json:"forwardAuth"`
		}
	}
	render(t, traefikDir).decode(t, "Middleware", "ratelimit", &mw)
	fa := mw.Spec.ForwardAuth
	checkServiceURL(t, "forwardAuth address", fa.Address, "/v1/forward-auth", "")
	if fa.TrustForwardHeader {
		t.Errorf("trustForwardHeader: a client could choose the X-Forwarded-For it is counted as")
	}
	if !slices.Contains(fa.AuthResponseHeaders, "RateLimit") {
		t.Errorf("authResponseHeaders %q lack RateLimit", fa.AuthResponseHeaders)
	}
}
