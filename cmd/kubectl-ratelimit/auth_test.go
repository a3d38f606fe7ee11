package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestTokenFlag: --token is sent without any kubeconfig, and instead of the kubeconfig's own.
func TestTokenFlag(t *testing.T) {
	srv := newFakeUsageServer(t, "flag-token", http.StatusOK, allowedBody)
	res := runPlugin(t, srv.args(t, "--token", "flag-token", "usage", "orders", "alice")...)
	if res.code != 0 {
		t.Fatalf("without a kubeconfig: exit %d, stderr %q", res.code, res.stderr)
	}
	if seen := srv.lastRequest(t); seen.path != "/v1/namespaces/default/ratelimitpolicies/orders/usage" {
		t.Errorf("path %q: want namespace default without a kubeconfig", seen.path)
	}
	res = runPlugin(t, srv.args(t, "--kubeconfig", tokenKubeconfig(t), "--token", "flag-token", "usage", "orders")...)
	if res.code != 0 {
		t.Fatalf("over the kubeconfig's token: exit %d, stderr %q", res.code, res.stderr)
	}
	if seen := srv.requests(); seen[1].auth != "Bearer flag-token" {
		t.Errorf("Authorization %q", seen[1].auth)
	}
}

// TestExecCredentialPlugin: the token an exec credential plugin prints is sent.
func TestExecCredentialPlugin(t *testing.T) {
	script := filepath.Join(t.TempDir(), "credential-plugin")
	credential := `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token"}}`
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '"+credential+"'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: script,
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}})
	srv := newFakeUsageServer(t, "exec-token", http.StatusTooManyRequests, deniedBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "usage", "orders", "alice")...)
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if seen := srv.lastRequest(t); seen.auth != "Bearer exec-token" {
		t.Errorf("Authorization %q", seen.auth)
	}
}

// TestTokenFile: the token a kubeconfig's tokenFile holds is sent.
func TestTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newFakeUsageServer(t, "file-token", http.StatusOK, allowedBody)
	kubeconfig := writeKubeconfig(t, &clientcmdapi.AuthInfo{TokenFile: file})
	if res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "usage", "orders")...); res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
}

// TestClientCertificateOnly: a kubeconfig user with a client certificate and no token gets an
// error saying the usage server wants a bearer token and suggesting --token; nothing is sent.
func TestClientCertificateOnly(t *testing.T) {
	cert, key := clientCertPEM(t)
	kubeconfig := writeKubeconfig(t, &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key})
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "usage", "orders", "alice")...)
	if res.code != 1 || !strings.Contains(res.stderr, "bearer token") || !strings.Contains(res.stderr, "--token") {
		t.Errorf("exit %d, stderr %q: want 1 and an error about bearer tokens suggesting --token", res.code, res.stderr)
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestClientCertificateNotSent: a kubeconfig user with a token and a client certificate sends
// the token and never the certificate, though the usage server asks for one.
func TestClientCertificateNotSent(t *testing.T) {
	cert, key := clientCertPEM(t)
	kubeconfig := writeKubeconfig(t, &clientcmdapi.AuthInfo{Token: testToken, ClientCertificateData: cert, ClientKeyData: key})
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	if res := runPlugin(t, srv.args(t, "--kubeconfig", kubeconfig, "usage", "orders")...); res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if seen := srv.lastRequest(t); seen.peerCerts != 0 {
		t.Errorf("the usage server got %d client certificates, want none", seen.peerCerts)
	}
}

// TestNoKubeconfig: with neither a kubeconfig nor --token the error says what to pass.
func TestNoKubeconfig(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	res := runPlugin(t, srv.args(t, "usage", "orders")...)
	if res.code != 1 || !strings.Contains(res.stderr, "pass --kubeconfig or --token") {
		t.Errorf("exit %d, stderr %q", res.code, res.stderr)
	}
}
