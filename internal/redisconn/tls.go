package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
)

// TLSOptions says how to encrypt and authenticate the connection to Redis.
//
// There is deliberately no --redis-tls-insecure-skip-verify: a limiter that accepts any
// server certificate can be handed any decision by whoever sits on the path to Redis, and
// would send the AUTH password to them. Point --redis-tls-ca-path at the CA that signed the
// server certificate instead, and use --redis-tls-server-name when the certificate does not
// name the address the operator dials.
type TLSOptions struct {
	// Enabled turns TLS on for every connection: the server, every Cluster node, and both the
	// Sentinels and the primary they name.
	Enabled bool
	// CAPath is a PEM bundle of the CAs trusted to sign server certificates. Empty means the
	// system roots (or CA).
	CAPath string
	// CA is a PEM bundle of the CAs trusted to sign server certificates, held in memory (a
	// RedisBackend's, read from a Secret); CAPath and CA are exclusive. Never bound to a flag.
	CA []byte
	// ServerName overrides the name verified in server certificates (and sent as SNI).
	// Empty means the host of each address dialled.
	ServerName string
	// CertPath and KeyPath are a PEM client certificate and its key, for servers that
	// require mutual TLS (tls-auth-clients yes). Both or neither.
	CertPath, KeyPath string
}

// bindFlags registers the TLS flags on fs, writing into t.
func (t *TLSOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&t.Enabled, "redis-tls", false,
		"Connect to Redis (and Sentinels) over TLS 1.2 or newer, verifying the server certificate.")
	fs.StringVar(&t.CAPath, "redis-tls-ca-path", "",
		"PEM file of the CAs that sign Redis server certificates (default: the system roots). Requires --redis-tls.")
	fs.StringVar(&t.ServerName, "redis-tls-server-name", "",
		"Name to verify in Redis server certificates and send as SNI (default: the host of each address). Requires --redis-tls.")
	fs.StringVar(&t.CertPath, "redis-tls-cert-path", "",
		"PEM client certificate for mutual TLS; requires --redis-tls and --redis-tls-key-path.")
	fs.StringVar(&t.KeyPath, "redis-tls-key-path", "",
		"PEM private key of --redis-tls-cert-path.")
}

// validate reports the first inconsistent TLS flag, by name. It does not read the files.
func (t *TLSOptions) validate() error {
	if !t.Enabled {
		for _, f := range []struct{ name, value string }{
			{"--redis-tls-ca-path", t.CAPath},
			{"--redis-tls-server-name", t.ServerName},
			{"--redis-tls-cert-path", t.CertPath},
			{"--redis-tls-key-path", t.KeyPath},
			{"tls.caSecretRef", string(t.CA)},
		} {
			if f.value != "" {
				return fmt.Errorf("%s: requires --redis-tls", f.name)
			}
		}
		return nil
	}
	switch {
	case t.CertPath != "" && t.KeyPath == "":
		return errors.New("--redis-tls-key-path: required with --redis-tls-cert-path")
	case t.KeyPath != "" && t.CertPath == "":
		return errors.New("--redis-tls-cert-path: required with --redis-tls-key-path")
	case t.CAPath != "" && len(t.CA) > 0:
		return errors.New("--redis-tls-ca-path: set together with an in-memory CA bundle")
	}
	return nil
}

// config builds the client TLS configuration, reading the CA bundle and the client key
// pair; nil when TLS is off. The files are read once: rotating them needs a restart.
func (t *TLSOptions) config() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAPath != "" {
		pool, err := loadCAPool(t.CAPath)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-ca-path: %w", err)
		}
		cfg.RootCAs = pool
	}
	if len(t.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.CA) {
			return nil, errors.New("tls CA bundle: no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if t.CertPath != "" {
		pair, err := tls.LoadX509KeyPair(t.CertPath, t.KeyPath)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-cert-path, --redis-tls-key-path: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// loadCAPool reads a PEM bundle into a pool holding only those CAs.
func loadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path) //nolint:gosec // the path is the operator's own flag
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", path)
	}
	return pool, nil
}
