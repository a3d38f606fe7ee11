// Package localca makes certificate authorities and the certificates they sign, for local
// control planes (the demo, the tests) that need real TLS: front-proxy client certificates,
// serving certificates for a name.
package localca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority made for a test: its certificate and key, to sign leaves.
type CA struct {
	// PEM is the CA certificate, PEM-encoded (a caBundle, a --*-ca-file).
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// New makes a self-signed CA named cn, valid for a day.
func New(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// Leaf is a certificate the CA signed and its key, PEM-encoded.
type Leaf struct {
	// Cert and Key are PEM.
	Cert, Key []byte
}

// Client signs a client certificate (ExtKeyUsageClientAuth) for cn in groups (O).
func (ca *CA) Client(cn string, groups ...string) (*Leaf, error) {
	return ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// Serving signs a serving certificate (ExtKeyUsageServerAuth) for the DNS names and
// 127.0.0.1.
func (ca *CA) Serving(dnsNames ...string) (*Leaf, error) {
	return ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
}

// sign completes tmpl as a day's leaf and signs it.
func (ca *CA) sign(tmpl *x509.Certificate) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	return &Leaf{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})}, nil
}

// Write writes the pair as dir/tls.crt and dir/tls.key (a --*-cert-dir's layout).
func (l *Leaf) Write(dir string) (crt, key string, err error) {
	crt, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("cert dir: %w", err)
	}
	if err := os.WriteFile(key, l.Key, 0o600); err != nil {
		return "", "", fmt.Errorf("write key: %w", err)
	}
	if err := os.WriteFile(crt, l.Cert, 0o600); err != nil {
		return "", "", fmt.Errorf("write certificate: %w", err)
	}
	return crt, key, nil
}

// serial is a random certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
