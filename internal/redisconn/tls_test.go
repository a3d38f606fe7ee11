package redisconn_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// serverName is the DNS name in the test server certificate, besides IP 127.0.0.1.
const serverName = "redis.test"

// pki is a throwaway CA with a server and a client certificate, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

// newPKI generates a CA and, signed by it, a server certificate for 127.0.0.1 and
// redis.test and a client certificate, in a temporary directory.
func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	p := pki{ca: filepath.Join(dir, "ca.crt"), serverCert: filepath.Join(dir, "server.crt"),
		serverKey: filepath.Join(dir, "server.key"), clientCert: filepath.Join(dir, "client.crt"),
		clientKey: filepath.Join(dir, "client.key")}
	caKey := newKey(t)
	caTmpl := certTemplate("test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	caDER := sign(t, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srv := certTemplate("redis")
	srv.DNSNames, srv.IPAddresses = []string{serverName}, []net.IP{net.IPv4(127, 0, 0, 1)}
	// Cluster nodes present the server certificate as clients on the bus, too.
	srv.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	issue(t, srv, ca, caKey, p.serverCert, p.serverKey)
	cli := certTemplate("ratelimit-operator")
	cli.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	issue(t, cli, ca, caKey, p.clientCert, p.clientKey)
	return p
}

var serial atomic.Int64

func certTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t *testing.T, tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// issue signs tmpl with the CA and writes the certificate and a new key as PEM.
func issue(t *testing.T, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	writePEM(t, certPath, "CERTIFICATE", sign(t, tmpl, ca, &key.PublicKey, caKey))
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyPath, "PRIVATE KEY", der)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startTLSServer starts a password-protected redis-server that also listens for TLS with p's
// server certificate, verifying client certificates against p's CA per authClients.
func startTLSServer(t *testing.T, p pki, authClients string) *redistest.Server {
	t.Helper()
	redistest.RequireRedis(t)
	return redistest.StartServer(t, redistest.WithPassword("pa55"), redistest.WithTLS(t, redistest.TLS{
		CertFile: p.serverCert, KeyFile: p.serverKey, CAFile: p.ca, AuthClients: authClients}))
}

// passwordSecret writes a basic-auth Secret directory holding only the password.
func passwordSecret(t *testing.T) string {
	t.Helper()
	return redistest.SecretDir(t, map[string]string{"password": "pa55"})
}

// tlsClient builds a standalone client for addr from command-line flags, as the operator
// does.
func tlsClient(t *testing.T, addr string, args ...string) redis.UniversalClient {
	t.Helper()
	args = append([]string{"--redis-addrs", addr, "--redis-credentials-path", passwordSecret(t)}, args...)
	return newClient(t, flagOptions(t, args...))
}

// pingErr is the error of one PING without retries.
func pingErr(t *testing.T, c redis.UniversalClient) error {
	t.Helper()
	return c.Do(testCtx(t), "PING").Err()
}

// decidedByRedis runs one limiter check over c and fails unless Redis decided it.
func decidedByRedis(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	if err := checkAlgorithm(testCtx(t), newLimiter(t, c), limiter.GCRA); err != nil {
		t.Fatalf("limiter over TLS: %v", err)
	}
}

// TestTLSStandalone reaches the TLS port of a real redis-server: with the CA it works and
// Redis decides checks; without the CA, with a wrong server name, or without TLS it fails.
func TestTLSStandalone(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	addr := startTLSServer(t, p, "optional").TLSAddr()

	decidedByRedis(t, tlsClient(t, addr, "--redis-tls", "--redis-tls-ca-path", p.ca))
	if err := pingErr(t, tlsClient(t, addr, "--redis-tls", "--redis-tls-ca-path", p.ca,
		"--redis-tls-server-name", serverName)); err != nil {
		t.Fatalf("with --redis-tls-server-name %s: %v", serverName, err)
	}
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"system roots only", "certificate signed by unknown authority", []string{"--redis-tls"}},
		{"wrong server name", "not wrong.test", []string{"--redis-tls", "--redis-tls-ca-path", p.ca,
			"--redis-tls-server-name", "wrong.test"}},
		{"plaintext to the TLS port", "", nil}, // any error: the server only speaks TLS there
	} {
		err := pingErr(t, tlsClient(t, addr, c.args...))
		t.Logf("%s: %v", c.name, err)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: PING error %v; want one containing %q", c.name, err, c.want)
		}
	}
}

// TestTLSMutual needs a client certificate when the server says tls-auth-clients yes: one
// signed by the server's CA is accepted, none or one from another CA is refused.
func TestTLSMutual(t *testing.T) {
	t.Parallel()
	p, stranger := newPKI(t), newPKI(t)
	addr := startTLSServer(t, p, "yes").TLSAddr()

	err := pingErr(t, tlsClient(t, addr, "--redis-tls", "--redis-tls-ca-path", p.ca))
	t.Logf("without a client certificate: %v", err)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without a client certificate: %v; want a TLS certificate alert", err)
	}
	err = pingErr(t, tlsClient(t, addr, "--redis-tls", "--redis-tls-ca-path", p.ca,
		"--redis-tls-cert-path", stranger.clientCert, "--redis-tls-key-path", stranger.clientKey))
	t.Logf("client certificate from another CA: %v", err)
	if err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
	decidedByRedis(t, tlsClient(t, addr, "--redis-tls", "--redis-tls-ca-path", p.ca,
		"--redis-tls-cert-path", p.clientCert, "--redis-tls-key-path", p.clientKey))
}

// TestTLSCluster loads the scripts on every primary and routes checks through a 3-primary
// Cluster whose clients and bus speak TLS, seeded with one node's TLS address: the nodes
// report their TLS ports to TLS clients, and every primary is reached on its TLS port.
func TestTLSCluster(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	redistest.RequireRedis(t)
	cl := redistest.StartCluster(t, 3, redistest.WithNodeOptions(redistest.WithTLS(t, redistest.TLS{
		CertFile: p.serverCert, KeyFile: p.serverKey, CAFile: p.ca, AuthClients: "optional", Cluster: true})))
	c := newClient(t, flagOptions(t, "--redis-mode", "cluster", "--redis-addrs", cl.Nodes()[0].TLSAddr(),
		"--redis-tls", "--redis-tls-ca-path", p.ca))
	ctx := testCtx(t)
	if errs := exercise(ctx, c, redistest.FlushScripts(cl.Primaries()...)); len(errs) > 0 {
		t.Fatalf("operator paths on Cluster over TLS: %v", errors.Join(errs...))
	}
	for i, n := range cl.Primaries() {
		list, err := n.Client().ClientList(ctx).Result()
		if err != nil || !strings.Contains(list, " laddr="+n.TLSAddr()+" ") {
			t.Fatalf("primary %d: no client on its TLS port %s: %v\n%s", i, n.TLSAddr(), err, list)
		}
	}
}

// TestTLSFlags checks the TLS flags: each needs --redis-tls, cert and key go together, and
// unreadable or mismatched files are named by their flag when the client is built.
func TestTLSFlags(t *testing.T) {
	t.Parallel()
	p, other := newPKI(t), newPKI(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    []string
		wantErr string // empty: NewClient succeeds
	}{
		{"tls with system roots", []string{"--redis-tls"}, ""},
		{"every flag", []string{"--redis-tls", "--redis-tls-ca-path", p.ca, "--redis-tls-server-name", serverName,
			"--redis-tls-cert-path", p.clientCert, "--redis-tls-key-path", p.clientKey}, ""},
		{"ca without tls", []string{"--redis-tls-ca-path", p.ca}, "--redis-tls-ca-path: requires --redis-tls"},
		{"server name without tls", []string{"--redis-tls-server-name", serverName},
			"--redis-tls-server-name: requires --redis-tls"},
		{"cert without tls", []string{"--redis-tls-cert-path", p.clientCert}, "--redis-tls-cert-path: requires --redis-tls"},
		{"cert without key", []string{"--redis-tls", "--redis-tls-cert-path", p.clientCert}, "--redis-tls-key-path: required"},
		{"key without cert", []string{"--redis-tls", "--redis-tls-key-path", p.clientKey}, "--redis-tls-cert-path: required"},
		{"missing ca", []string{"--redis-tls", "--redis-tls-ca-path", "/nonexistent/ca.crt"},
			"--redis-tls-ca-path: read CA bundle"},
		{"ca not PEM", []string{"--redis-tls", "--redis-tls-ca-path", garbage}, "--redis-tls-ca-path: no PEM certificate"},
		{"key of another cert", []string{"--redis-tls", "--redis-tls-cert-path", p.clientCert, "--redis-tls-key-path", other.clientKey},
			"--redis-tls-cert-path, --redis-tls-key-path: tls: private key does not match public key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := redisconn.NewClient(flagOptions(t, c.args...))
			if cl != nil {
				_ = cl.Close()
			}
			checkRefusal(t, err, c.wantErr)
		})
	}
}

// TestTLSEveryMode checks the TLS settings reach the client of each topology (in Sentinel
// mode go-redis dials the Sentinels with the same config as the primary), and that Topology
// tells TLS without any file path.
func TestTLSEveryMode(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	for _, mode := range []redisconn.Mode{redisconn.ModeStandalone, redisconn.ModeCluster, redisconn.ModeSentinel} {
		o := redisconn.Options{Mode: mode, Addrs: []string{"127.0.0.1:1"}, MasterName: "m",
			TLS: redisconn.TLSOptions{Enabled: true, CAPath: p.ca, ServerName: serverName}}
		c := newClient(t, o)
		var cfg *tls.Config
		switch c := c.(type) {
		case *redis.Client:
			cfg = c.Options().TLSConfig
		case *redis.ClusterClient:
			cfg = c.Options().TLSConfig
		}
		if cfg == nil || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs == nil || cfg.ServerName != serverName ||
			cfg.InsecureSkipVerify {
			t.Fatalf("%s: TLS config %+v", mode, cfg)
		}
		topo := o.Topology()
		if !topo.TLS || strings.Contains(fmt.Sprintf("%+v", topo), p.ca) {
			t.Fatalf("%s: topology %+v; want TLS true and no file path", mode, topo)
		}
	}
}

// startSentinel starts a Sentinel that listens only for TLS and watches the primary at
// masterAddr (its TLS port) over TLS, and returns the Sentinel's address. It is stopped by
// its PID when the test ends.
func startSentinel(t *testing.T, p pki, masterAddr string) string {
	t.Helper()
	bin := redistest.RequireRedis(t)
	dir := t.TempDir()
	addr := wait.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	host, masterPort, _ := net.SplitHostPort(masterAddr)
	conf := fmt.Sprintf("bind 127.0.0.1\nport 0\ntls-port %s\ntls-cert-file %s\ntls-key-file %s\n"+
		"tls-ca-cert-file %s\ntls-auth-clients optional\ntls-replication yes\ndir %s\nlogfile %s\n"+
		"sentinel monitor m %s %s 1\nsentinel auth-pass m pa55\n",
		port, p.serverCert, p.serverKey, p.ca, dir, filepath.Join(dir, "sentinel.log"), host, masterPort)
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, path, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sentinel: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitListening(t, addr)
	return addr
}

// waitListening waits up to 10s until something accepts connections at addr.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	wait.Eventually(t, 10*time.Second, "a listener at "+addr, func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// TestTLSSentinel finds the primary through a TLS-only Sentinel and checks over TLS: both the
// Sentinel and the primary connection use the TLS flags.
func TestTLSSentinel(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	master := startTLSServer(t, p, "optional")
	sentinel := startSentinel(t, p, master.TLSAddr())
	decidedByRedis(t, newClient(t, flagOptions(t, "--redis-mode", "sentinel", "--redis-master-name", "m", "--redis-addrs", sentinel,
		"--redis-credentials-path", passwordSecret(t), "--redis-tls", "--redis-tls-ca-path", p.ca)))
	list, err := master.Client().ClientList(testCtx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		// The Sentinel's own connections (named sentinel-...) use the TLS port too.
		if strings.Contains(line, " laddr="+master.TLSAddr()+" ") && !strings.Contains(line, " name=sentinel-") {
			return
		}
	}
	t.Fatalf("no operator connection on the primary's TLS port %s:\n%s", master.TLSAddr(), list)
}
