package usageapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/fake"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"

	"github.com/ratelimit-dev/ratelimit-operator/hack/localca"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// frontProxyRig is a usage server whose guard takes the front proxy of a fake cluster's
// extension-apiserver-authentication ConfigMap (CA front, allowed name front-proxy-client),
// served over the real TLS configuration, and an authorizer that allows alice alone.
type frontProxyRig struct {
	url    string
	server *x509.CertPool
	front  *localca.CA
	asked  chan string // the users the authorizer was asked about
}

func newFrontProxyRig(t *testing.T) *frontProxyRig {
	t.Helper()
	front, err := localca.New("front-proxy-ca")
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: AuthenticationConfigMapNamespace, Name: AuthenticationConfigMapName},
		Data: map[string]string{
			"requestheader-client-ca-file":       string(front.PEM),
			"requestheader-allowed-names":        `["front-proxy-client"]`,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		}})
	proxy, err := NewFrontProxy(cs, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = proxy.Start(ctx) }()
	wait.Eventually(t, 10*time.Second, "front-proxy CA read", func() error {
		if _, ok := proxy.ca.VerifyOptions(); !ok || len(proxy.headers.UsernameHeaders()) == 0 {
			return io.EOF
		}
		return nil
	})
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{}, RequestHeaderConfig: proxy.config(),
	}.New()
	if err != nil {
		t.Fatal(err)
	}
	r := &frontProxyRig{front: front, asked: make(chan string, 16)}
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		r.asked <- a.GetUser().GetName()
		if a.GetUser().GetName() == "alice" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "", nil
	})
	srv := NewServer(&Guard{Authn: authn, Authz: authz}, ctrlfake.NewClientBuilder().Build(), NewLimiters(nil, limiter.Options{}), nil, logr.Discard())
	ts := httptest.NewUnstartedServer(srv)
	serving := &Serving{}
	if ts.TLS, err = serving.tlsConfig(ctx); err != nil {
		t.Fatal(err)
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	r.url, r.server = ts.URL, x509.NewCertPool()
	r.server.AddCert(ts.Certificate())
	return r
}

// get sends GET path with the headers, presenting cert (nil: none), and returns the status
// and the body.
func (r *frontProxyRig) get(t *testing.T, path string, cert *localca.Leaf, headers map[string]string) (int, string) {
	t.Helper()
	cfg := &tls.Config{RootCAs: r.server, MinVersion: tls.VersionTLS12}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert.Cert, cert.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	req, err := http.NewRequest(http.MethodGet, r.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// forged are headers naming a user and the cluster admins' group.
var forged = map[string]string{"X-Remote-User": "alice", "X-Remote-Group": "system:masters", "X-Remote-Extra-Scopes": "all"}

// TestForgedFrontProxyHeadersRefused: X-Remote-* headers are believed only with a client
// certificate the front-proxy CA signed for an allowed name. Sent over plain TLS without a
// certificate, with one another CA signed for the allowed name, or with one the front-proxy
// CA signed for another name, they are refused (401) before any authorization is asked or
// anything read, on the usage routes and the discovery documents alike.
func TestForgedFrontProxyHeadersRefused(t *testing.T) {
	r := newFrontProxyRig(t)
	rogue, err := localca.New("front-proxy-ca")
	if err != nil {
		t.Fatal(err)
	}
	rogueCert, err := rogue.Client("front-proxy-client")
	if err != nil {
		t.Fatal(err)
	}
	otherName, err := r.front.Client("someone-else")
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{
		AggregatedPrefix + "/namespaces/shop/ratelimitpolicies/orders/usage?identity=bob",
		LegacyPrefix + "/namespaces/shop/ratelimitpolicies/orders/usage?identity=bob",
		AggregatedPrefix + "/namespaces/shop/ratelimitpolicies/orders/usage/top",
		AggregatedPrefix, DiscoveryRoot,
	}
	for name, cert := range map[string]*localca.Leaf{"no certificate": nil, "another CA's": rogueCert, "another name's": otherName} {
		for _, path := range paths {
			status, body := r.get(t, path, cert, forged)
			if status != http.StatusUnauthorized || !strings.Contains(body, "not authenticated") {
				t.Errorf("%s, %s: %d %s; want 401", name, path, status, body)
			}
		}
	}
	select {
	case who := <-r.asked:
		t.Errorf("the authorizer was asked about %q", who)
	default:
	}
}

// TestFrontProxyUser: with the front proxy's certificate the user is X-Remote-User, and is
// what authorization is asked about: alice passes it (and finds no snapshot: 404), bob is
// refused (403); the discovery documents answer.
func TestFrontProxyUser(t *testing.T) {
	r := newFrontProxyRig(t)
	cert, err := r.front.Client("front-proxy-client")
	if err != nil {
		t.Fatal(err)
	}
	path := AggregatedPrefix + "/namespaces/shop/ratelimitpolicies/orders/usage?identity=x"
	if status, body := r.get(t, path, cert, map[string]string{"X-Remote-User": "alice"}); status != http.StatusNotFound || !strings.Contains(body, ErrNoSnapshot.Error()) {
		t.Errorf("alice: %d %s; want 404 (authorized, no snapshot)", status, body)
	}
	if status, body := r.get(t, path, cert, map[string]string{"X-Remote-User": "bob", "X-Remote-Group": "support"}); status != http.StatusForbidden || !strings.Contains(body, "bob may not get") {
		t.Errorf("bob: %d %s; want 403", status, body)
	}
	if got := []string{<-r.asked, <-r.asked}; got[0] != "alice" || got[1] != "bob" {
		t.Errorf("authorizer asked about %q", got)
	}
	status, body := r.get(t, AggregatedPrefix, cert, map[string]string{"X-Remote-User": "system:kube-aggregator"})
	var list metav1.APIResourceList
	if err := json.Unmarshal([]byte(body), &list); status != http.StatusOK || err != nil || list.GroupVersion != Group+"/"+Version ||
		len(list.APIResources) != 1 || list.APIResources[0].Name != "ratelimitpolicies/usage" || !list.APIResources[0].Namespaced {
		t.Errorf("discovery: %d %s", status, body)
	}
}
