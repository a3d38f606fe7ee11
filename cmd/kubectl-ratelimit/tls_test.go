package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerCertificateVerified: the usage server's certificate is verified against
// --certificate-authority, not trusted by default (unknown authority), and not verified at
// all only with --insecure-skip-tls-verify.
func TestServerCertificateVerified(t *testing.T) {
	srv := newFakeUsageServer(t, testToken, http.StatusOK, allowedBody)
	kubeconfig := tokenKubeconfig(t)
	res := runPlugin(t, "--server", srv.URL, "--kubeconfig", kubeconfig, "usage", "orders")
	if res.code != 1 || !strings.Contains(res.stderr, "certificate signed by unknown authority") {
		t.Errorf("without the CA: exit %d, stderr %q; want 1 and an unknown authority", res.code, res.stderr)
	}
	res = runPlugin(t, "--server", srv.URL, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig, "usage", "orders")
	if res.code != 0 {
		t.Errorf("--insecure-skip-tls-verify: exit %d, stderr %q", res.code, res.stderr)
	}
	res = runPlugin(t, srv.args(t, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig, "usage", "orders")...)
	if res.code != 1 || !strings.Contains(res.stderr, "mutually exclusive") {
		t.Errorf("both: exit %d, stderr %q", res.code, res.stderr)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d requests reached the server, want 1 (the insecure one)", n)
	}
}

// TestBadCertificateAuthority: a CA file that is missing or holds no PEM certificate is an
// error naming the flag.
func TestBadCertificateAuthority(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{notPEM, filepath.Join(t.TempDir(), "missing.pem")} {
		res := runPlugin(t, "--server", "https://127.0.0.1:1", "--certificate-authority", file, "--token", "x",
			"usage", "orders")
		if res.code != 1 || !strings.Contains(res.stderr, "--certificate-authority") {
			t.Errorf("%s: exit %d, stderr %q", file, res.code, res.stderr)
		}
	}
}
