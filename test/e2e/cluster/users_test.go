package cluster_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// tokenKubeconfig is a kubeconfig for the cluster whose user is ServiceAccount sa of the
// watching namespace, with a token of an hour.
func (j *journey) tokenKubeconfig(t *testing.T, sa string) string {
	t.Helper()
	token := strings.TrimSpace(kc(t, j.c, "-n", watchNS, "create", "token", sa, "--duration=1h"))
	return j.userKubeconfig(t, sa, &clientcmdapi.AuthInfo{Token: token})
}

// certKubeconfig is a kubeconfig for the cluster whose user is a client certificate for
// user, issued through the CertificateSigningRequest API (signer
// kubernetes.io/kube-apiserver-client, approved by the admin), as a platform team issues one.
func (j *journey) certKubeconfig(t *testing.T, user string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: user}}, key)
	if err != nil {
		t.Fatal(err)
	}
	name := "e2e-" + j.run + "-" + fmt.Sprint(time.Now().UnixNano()%1e6)
	apply(t, j.c, "", fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: %s
spec:
  request: %s
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 3600
  usages: [client auth]
`, name, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}))))
	kc(t, j.c, "certificate", "approve", name)
	var cert []byte
	wait.Eventually(t, time.Minute, "the CSR signed", func() error {
		out := strings.TrimSpace(kc(t, j.c, "get", "csr", name, "-o", "jsonpath={.status.certificate}"))
		if out == "" {
			return fmt.Errorf("csr %s not signed yet", name)
		}
		cert, err = base64.StdEncoding.DecodeString(out)
		return err
	})
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return j.userKubeconfig(t, user, &clientcmdapi.AuthInfo{ClientCertificateData: cert,
		ClientKeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})})
}

// userKubeconfig writes the admin kubeconfig's cluster with auth as the only user.
func (j *journey) userKubeconfig(t *testing.T, user string, auth *clientcmdapi.AuthInfo) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(j.c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := admin.Contexts[admin.CurrentContext]
	if ctx == nil {
		t.Fatalf("%s has no current context", j.c.Kubeconfig)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = admin.Clusters[ctx.Cluster]
	cfg.AuthInfos[user] = auth
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: user, Namespace: watchNS}
	cfg.CurrentContext = "ctx"
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
