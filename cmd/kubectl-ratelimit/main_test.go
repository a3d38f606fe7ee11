package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestMain keeps the tests away from the user's kubeconfig and usage server: $KUBECONFIG
// names a file that does not exist, and $RATELIMIT_USAGE_SERVER is unset.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubectl-ratelimit-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Setenv("KUBECONFIG", filepath.Join(dir, "no-kubeconfig"))
	_ = os.Unsetenv(serverEnv)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Answers of the usage server the tests serve.
const (
	deniedBody = `{"policy":"orders","allowed":false,"result":"denied","limit":"per-minute","quota":5,` +
		`"remaining":0,"retryAfterMs":11873,"resetAfterMs":59873,"source":"Redis","snapshotVersion":"abc",` +
		`"tier":"pro","peek":true,"limits":[{"name":"per-minute","quota":5,"used":5,"remaining":0,` +
		`"resetAfterMs":59873,"retryAfterMs":11873}]}`
	allowedBody = `{"policy":"orders","allowed":true,"result":"allowed","limit":"per-minute","quota":5,` +
		`"remaining":3,"retryAfterMs":0,"resetAfterMs":24000,"source":"Redis","snapshotVersion":"abc",` +
		`"peek":true,"limits":[{"name":"per-minute","quota":5,"used":2,"remaining":3,"resetAfterMs":24000,` +
		`"retryAfterMs":0},{"name":"per-day","quota":1000,"used":2,"remaining":998,"resetAfterMs":86399000,` +
		`"retryAfterMs":0}]}`
	failOpenBody = `{"policy":"orders","allowed":true,"result":"allowed","quota":0,"remaining":0,` +
		`"retryAfterMs":0,"resetAfterMs":0,"source":"FailOpen","snapshotVersion":"abc","peek":true}`
	// testToken is the token the fake server accepts unless told otherwise.
	testToken = "static-token"
)

// seenRequest is what the fake usage server was sent.
type seenRequest struct {
	method      string
	path        string
	query       url.Values
	auth        string
	contentType string
	body        string
	peerCerts   int
}

// fakeUsageServer is a TLS usage server that wants "Authorization: Bearer <token>" (401
// otherwise), records each request and answers with a fixed status and body.
type fakeUsageServer struct {
	*httptest.Server
	token  string
	status int
	body   string

	// respond, when set, answers instead of status and body: the status, a Retry-After
	// ("" for none) and the body, from the request's query.
	respond func(q url.Values) (status int, retryAfter, body string)

	mu   sync.Mutex
	seen []seenRequest
}

// newFakeUsageServer starts a fake usage server answering status and body to the bearer of
// token. It asks for (and records) client certificates, so a test sees any the plugin sends.
func newFakeUsageServer(t *testing.T, token string, status int, body string) *fakeUsageServer {
	t.Helper()
	f := &fakeUsageServer{token: token, status: status, body: body}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	f.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the tests make fail
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

// serve records the request and answers it.
func (f *fakeUsageServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	seen := seenRequest{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.Query(),
		auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type"), body: string(body)}
	if r.TLS != nil {
		seen.peerCerts = len(r.TLS.PeerCertificates)
	}
	f.mu.Lock()
	f.seen = append(f.seen, seen)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if seen.auth != "Bearer "+f.token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"the bearer token is not valid"}`))
		return
	}
	status, answer := f.status, f.body
	if f.respond != nil {
		var retryAfter string
		status, retryAfter, answer = f.respond(seen.query)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(answer))
}

// requests is what the server was sent so far.
func (f *fakeUsageServer) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// lastRequest is the one request the server must have been sent.
func (f *fakeUsageServer) lastRequest(t *testing.T) seenRequest {
	t.Helper()
	seen := f.requests()
	if len(seen) != 1 {
		t.Fatalf("the usage server got %d requests, want 1", len(seen))
	}
	return seen[0]
}

// caFile writes the server's certificate PEM-encoded to a file and returns its path.
func (f *fakeUsageServer) caFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// args are the flags that reach and trust the server, followed by more.
func (f *fakeUsageServer) args(t *testing.T, more ...string) []string {
	t.Helper()
	return append([]string{"--server", f.URL, "--certificate-authority", f.caFile(t)}, more...)
}

// result is what one run of the plugin did.
type result struct {
	code   int
	stdout string
	stderr string
}

// runPlugin runs the plugin with args.
func runPlugin(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// writeKubeconfig writes a kubeconfig whose user is user and returns its path. Its current
// context "main" has namespace "shop"; context "other" has none.
func writeKubeconfig(t *testing.T, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["user"] = user
	cfg.Contexts["main"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user", Namespace: "shop"}
	cfg.Contexts["other"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	cfg.CurrentContext = "main"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenKubeconfig writes a kubeconfig whose user has the static token testToken.
func tokenKubeconfig(t *testing.T) string {
	t.Helper()
	return writeKubeconfig(t, &clientcmdapi.AuthInfo{Token: testToken})
}

// clientCertPEM makes a self-signed client certificate and its key, PEM-encoded.
func clientCertPEM(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alice"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// refusal is a command line the plugin must refuse before sending anything, and what its
// error says.
type refusal struct {
	args    []string
	wantErr string
}

// requireRefusedLocally runs each command line with a token kubeconfig against srv and
// requires exit 1 with its error on stderr, and no request sent.
func requireRefusedLocally(t *testing.T, srv *fakeUsageServer, cases []refusal) {
	t.Helper()
	kubeconfig := tokenKubeconfig(t)
	for _, tc := range cases {
		res := runPlugin(t, srv.args(t, append([]string{"--kubeconfig", kubeconfig}, tc.args...)...)...)
		if res.code != 1 || !strings.Contains(res.stderr, tc.wantErr) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tc.args, res.code, res.stderr, tc.wantErr)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}
