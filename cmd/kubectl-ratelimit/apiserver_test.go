package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ratelimit-dev/ratelimit-operator/internal/usageapi"
)

// TestAPIPrefixIsTheServers: the plugin's path of the aggregated API is the one the manager
// mounts (the plugin does not link the server's package, so the two are checked here).
func TestAPIPrefixIsTheServers(t *testing.T) {
	if apiPrefix != usageapi.AggregatedPrefix || apiServiceName != usageapi.APIServiceName {
		t.Errorf("plugin %s (%s), server %s (%s)", apiPrefix, apiServiceName, usageapi.AggregatedPrefix, usageapi.APIServiceName)
	}
}

// apiServerKubeconfig writes a kubeconfig whose cluster is the fake server srv (trusted by
// its CA) and whose user is user, in namespace shop.
func apiServerKubeconfig(t *testing.T, srv *fakeUsageServer, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthority: srv.caFile(t)}
	cfg.AuthInfos["user"] = user
	cfg.Contexts["main"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user", Namespace: "shop"}
	cfg.CurrentContext = "main"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestThroughTheAPIServer: without --server the plugin calls the kubeconfig's API server at
// /apis/usage.ratelimit.dev/v1alpha1/..., with the kubeconfig's credentials as kubectl sends
// them: a client certificate (and no token) for a certificate user, the token for a token
// user; --token overrides the kubeconfig's as kubectl's does.
func TestThroughTheAPIServer(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	res := runPlugin(t, "--kubeconfig", apiServerKubeconfig(t, srv, &clientcmdapi.AuthInfo{Token: testToken}), "usage", "orders", "alice")
	if res.code != 0 || !strings.Contains(res.stdout, "per-minute") {
		t.Fatalf("token user: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	seen := srv.lastRequest(t)
	if seen.path != "/apis/usage.ratelimit.dev/v1alpha1/namespaces/shop/ratelimitpolicies/orders/usage" || seen.auth != "Bearer "+testToken {
		t.Errorf("path %q, auth %q", seen.path, seen.auth)
	}

	certPEM, keyPEM := clientCertPEM(t)
	srv = newFakeUsageServer(t, "", http.StatusOK, allowedBody)
	certUser := apiServerKubeconfig(t, srv, &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM})
	res = runPlugin(t, "--kubeconfig", certUser, "usage", "orders", "alice")
	// The fake wants "Bearer " (an empty token) and gets none: 401, yet the request came.
	if seen := srv.lastRequest(t); seen.peerCerts != 1 || seen.auth != "" {
		t.Errorf("certificate user: %d client certificates, auth %q; want 1 and none", seen.peerCerts, seen.auth)
	}
	if res.code != 1 || !strings.Contains(res.stderr, "401") {
		t.Errorf("certificate user: exit %d, stderr %q", res.code, res.stderr)
	}
	srv = newFakeUsageServer(t, "other", http.StatusOK, allowedBody)
	res = runPlugin(t, "--kubeconfig", apiServerKubeconfig(t, srv, &clientcmdapi.AuthInfo{Token: testToken}), "--token", "other",
		"grant", "orders", "alice", "2")
	if seen := srv.lastRequest(t); seen.auth != "Bearer other" || seen.method != http.MethodPost ||
		seen.path != "/apis/usage.ratelimit.dev/v1alpha1/namespaces/shop/ratelimitpolicies/orders/usage/grant" {
		t.Errorf("--token: %s %s, auth %q (exit %d, stderr %q)", seen.method, seen.path, seen.auth, res.code, res.stderr)
	}
}

// TestAPIServerRefusalsExplained: the API server's own refusals (a Status, or plain text) are
// printed with what they mean: 404 no APIService, 503 the usage server unreachable, 403 the
// two API groups RBAC must grant; the usage server's own answers pass through unchanged.
func TestAPIServerRefusalsExplained(t *testing.T) {
	const notFound = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`
	const forbidden = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"ratelimitpolicies.usage.ratelimit.dev \"orders\" is forbidden: User \"carol\" cannot get resource \"ratelimitpolicies/usage\" in API group \"usage.ratelimit.dev\" in the namespace \"shop\"","reason":"Forbidden","code":403}`
	for _, tc := range []struct {
		status int
		body   string
		want   []string
	}{
		{http.StatusNotFound, notFound, []string{"404 Not Found: the server could not find the requested resource", "no APIService v1alpha1.usage.ratelimit.dev", "usageApi.apiService.enabled", "--server"}},
		{http.StatusServiceUnavailable, "service unavailable\n", []string{"503 Service Unavailable: service unavailable", "is the manager running?", "kubectl get apiservice v1alpha1.usage.ratelimit.dev"}},
		{http.StatusForbidden, forbidden, []string{`403 Forbidden: ratelimitpolicies.usage.ratelimit.dev "orders" is forbidden: User "carol" cannot get`, "two API groups", "usage-reader"}},
		{http.StatusForbidden, `{"error":"carol may not get ratelimitpolicies/usage"}`, []string{"error: 403 Forbidden: carol may not get ratelimitpolicies/usage\n"}},
	} {
		srv := newFakeUsageServer(t, testToken, tc.status, tc.body)
		res := runPlugin(t, "--kubeconfig", apiServerKubeconfig(t, srv, &clientcmdapi.AuthInfo{Token: testToken}), "usage", "orders", "alice")
		if res.code != 1 || !containsAll(res.stderr, tc.want) {
			t.Errorf("%d: exit %d, stderr %q; want 1 and %q", tc.status, res.code, res.stderr, tc.want)
		}
	}
}

// containsAll reports whether s contains every fragment.
func containsAll(s string, frags []string) bool {
	for _, f := range frags {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}
