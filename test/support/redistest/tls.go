package redistest

import (
	"net"
	"strconv"
	"testing"
)

// TLS is the server side of a TLS listener: PEM files and the client-certificate policy.
type TLS struct {
	// CertFile and KeyFile are the server's certificate (chain) and private key.
	CertFile, KeyFile string
	// CAFile is the PEM bundle that client certificates are verified against.
	CAFile string
	// AuthClients is tls-auth-clients: "yes" (default) requires a client certificate signed
	// by CAFile, "optional" verifies one when sent, "no" ignores it.
	AuthClients string
	// Cluster also encrypts the cluster bus (tls-cluster yes); for WithNodeOptions.
	Cluster bool
}

// WithTLS makes the server listen for TLS on a free port of its own as well, reported by
// Server.TLSAddr. The plain port stays open, so the harness (readiness, Server.Client,
// cluster forming) keeps working without certificates. Every server the option is applied to
// gets a fresh port, so it also suits WithNodeOptions; the port is kept across Restart.
func WithTLS(t testing.TB, cfg TLS) Option {
	return func(c *config) {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: TLS port: %v", err)
		}
		auth := cfg.AuthClients
		if auth == "" {
			auth = "yes"
		}
		c.args = append(c.args,
			"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", cfg.CertFile,
			"--tls-key-file", cfg.KeyFile,
			"--tls-ca-cert-file", cfg.CAFile,
			"--tls-auth-clients", auth,
		)
		if cfg.Cluster {
			c.args = append(c.args, "--tls-cluster", "yes")
		}
	}
}

// TLSAddr returns the server's "127.0.0.1:port" TLS address, or "" when it was started
// without WithTLS.
func (s *Server) TLSAddr() string {
	port := ""
	for i, a := range s.cfg.args[:max(len(s.cfg.args)-1, 0)] {
		if a == "--tls-port" {
			port = s.cfg.args[i+1] // the last one wins, as in redis-server
		}
	}
	if port == "" {
		return ""
	}
	return net.JoinHostPort(Host, port)
}
