package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/hack/localca"
)

// FrontProxyClientName is the common name of the API server's front-proxy client certificate,
// and the only name --requestheader-allowed-names allows.
const FrontProxyClientName = "front-proxy-client"

// Aggregation is the aggregation layer of a test control plane, configured as a cluster's
// kube-apiserver is: a front-proxy CA (--requestheader-client-ca-file) and the client
// certificate it signed for the API server to present when it proxies a request to an
// APIService (--proxy-client-cert-file), with the standard header names. kube-apiserver
// publishes these settings in the ConfigMap kube-system/extension-apiserver-authentication,
// where aggregated API servers read them. The demo (hack/demo) can pass Configure to
// controlplane.Start as well.
type Aggregation struct {
	// Dir holds the CA and the proxy client's pair.
	Dir string
	// CA is the front-proxy CA.
	CA *localca.CA
}

// NewAggregation makes the front-proxy CA and the proxy client certificate in a fresh
// directory; Remove deletes it.
func NewAggregation() (*Aggregation, error) {
	dir, err := os.MkdirTemp("", "envtest-front-proxy-")
	if err != nil {
		return nil, fmt.Errorf("front-proxy dir: %w", err)
	}
	a := &Aggregation{Dir: dir}
	if err := a.write(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return a, nil
}

// write makes and writes the CA and the proxy client's pair.
func (a *Aggregation) write() error {
	var err error
	if a.CA, err = localca.New("front-proxy-ca"); err != nil {
		return err
	}
	if err := os.WriteFile(a.caFile(), a.CA.PEM, 0o600); err != nil {
		return fmt.Errorf("write front-proxy CA: %w", err)
	}
	client, err := a.CA.Client(FrontProxyClientName)
	if err != nil {
		return err
	}
	_, _, err = client.Write(filepath.Join(a.Dir, "proxy-client"))
	return err
}

// caFile is the front-proxy CA's file.
func (a *Aggregation) caFile() string { return filepath.Join(a.Dir, "front-proxy-ca.crt") }

// Args are kube-apiserver's front-proxy flags (without the leading --), as a cluster's
// kube-apiserver needs them for APIServices to work.
func (a *Aggregation) Args() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       a.caFile(),
		"requestheader-allowed-names":        FrontProxyClientName,
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             filepath.Join(a.Dir, "proxy-client", "tls.crt"),
		"proxy-client-key-file":              filepath.Join(a.Dir, "proxy-client", "tls.key"),
	}
}

// Configure is a Start option: it adds Args to the environment's kube-apiserver. Aggregator
// routing stays off, so that the API server reaches an APIService's ExternalName Service at
// its external name (there is no kube-proxy here to route a ClusterIP).
func (a *Aggregation) Configure(te *envtest.Environment) {
	args := te.ControlPlane.GetAPIServer().Configure()
	for k, v := range a.Args() {
		args.Set(k, v)
	}
}

// Remove deletes the certificates' directory.
func (a *Aggregation) Remove() {
	if a != nil {
		_ = os.RemoveAll(a.Dir)
	}
}
