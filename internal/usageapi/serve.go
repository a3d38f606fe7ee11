package usageapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Serving serves a handler over TLS as a manager Runnable, on every replica (reads need no
// leader).
type Serving struct {
	// Addr is the listen address, e.g. ":8445".
	Addr string
	// CertDir holds tls.crt and tls.key, reloaded when they change (cert-manager, a
	// rotated Secret). When they are absent the server makes a self-signed pair and writes
	// it there, so a client can trust tls.crt; without CertDir the pair lives in memory.
	CertDir string
	// Handler answers the requests.
	Handler http.Handler
	// Log receives start and stop.
	Log logr.Logger
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves.
func (s *Serving) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Serving) Start(ctx context.Context) error {
	cfg, err := s.tlsConfig(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("usage api: listen %s: %w", s.Addr, err)
	}
	srv := &http.Server{Handler: s.Handler, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() {
		<-ctx.Done()
		// ctx is done: the shutdown's own bound must not derive from it.
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	s.Log.Info("serving the usage API", "addr", ln.Addr().String(), "certDir", s.CertDir)
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("usage api: %w", err)
	}
	return nil
}

// tlsConfig is the server's certificate: CertDir's pair (watched), a self-signed pair
// written there, or one in memory.
func (s *Serving) tlsConfig(ctx context.Context) (*tls.Config, error) {
	// Client certificates are asked for, not required: the aggregation layer's front proxy
	// presents one (verified by the authenticator against the requestheader CA, not here),
	// bearer-token clients present none.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
	if s.CertDir == "" {
		pair, err := selfSigned()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
		return cfg, nil
	}
	crt, key := filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key")
	if err := writeSelfSignedIfAbsent(crt, key); err != nil {
		return nil, err
	}
	w, err := certwatcher.New(crt, key)
	if err != nil {
		return nil, fmt.Errorf("usage api: certificate: %w", err)
	}
	go func() { _ = w.Start(ctx) }()
	cfg.GetCertificate = w.GetCertificate
	return cfg, nil
}

// generate is a fresh self-signed pair (PEM) for localhost and 127.0.0.1.
func generate() (crt, key []byte, err error) {
	crt, key, err = certutil.GenerateSelfSignedCertKey("ratelimit-usage", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return nil, nil, fmt.Errorf("usage api: self-signed certificate: %w", err)
	}
	return crt, key, nil
}

// selfSigned is a fresh self-signed pair, in memory.
func selfSigned() (tls.Certificate, error) {
	crt, key, err := generate()
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("usage api: self-signed certificate: %w", err)
	}
	return pair, nil
}

// writeSelfSignedIfAbsent writes a self-signed pair to crt and key unless crt exists.
func writeSelfSignedIfAbsent(crt, key string) error {
	if _, err := os.Stat(crt); err == nil {
		return nil
	}
	c, k, err := generate()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(crt), 0o750); err != nil {
		return fmt.Errorf("usage api: %w", err)
	}
	if err := os.WriteFile(key, k, 0o600); err != nil {
		return fmt.Errorf("usage api: write key: %w", err)
	}
	if err := os.WriteFile(crt, c, 0o644); err != nil { //nolint:gosec // a certificate is public
		return fmt.Errorf("usage api: write certificate: %w", err)
	}
	return nil
}
