package usageapi

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// Where kube-apiserver publishes its front-proxy settings (--requestheader-* flags) for
// aggregated API servers, and the keys the settings are under.
const (
	// AuthenticationConfigMapNamespace and AuthenticationConfigMapName name the ConfigMap.
	AuthenticationConfigMapNamespace = "kube-system"
	// AuthenticationConfigMapName is its name.
	AuthenticationConfigMapName = "extension-apiserver-authentication"
)

// FrontProxy authenticates requests the Kubernetes API server's aggregation layer proxies:
// a client certificate signed by the requestheader client CA and with one of the allowed
// names, whose user is then read from the header names the API server publishes
// (X-Remote-User, X-Remote-Group, X-Remote-Extra-*). All of it comes from the ConfigMap
// kube-system/extension-apiserver-authentication, watched (k8s.io/apiserver's own
// controllers, as every aggregated API server uses them), so a rotated front-proxy CA is
// picked up. Headers of a request without such a certificate are never read.
type FrontProxy struct {
	ca      *dynamiccertificates.ConfigMapCAController
	headers *headerrequest.RequestHeaderAuthRequestController
	log     logr.Logger
}

// NewFrontProxy reads the front-proxy settings through cs; Start keeps them current.
func NewFrontProxy(cs kubernetes.Interface, log logr.Logger) (*FrontProxy, error) {
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("requestheader-client-ca",
		AuthenticationConfigMapNamespace, AuthenticationConfigMapName, "requestheader-client-ca-file", cs)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client CA: %w", err)
	}
	headers := headerrequest.NewRequestHeaderAuthRequestController(AuthenticationConfigMapName,
		AuthenticationConfigMapNamespace, cs, "requestheader-username-headers", "requestheader-uid-headers",
		"requestheader-group-headers", "requestheader-extra-headers-prefix", "requestheader-allowed-names")
	return &FrontProxy{ca: ca, headers: headers, log: log}, nil
}

// config is the delegating authenticator's request-header configuration, read at each
// request from the watched ConfigMap.
func (p *FrontProxy) config() *authenticatorfactory.RequestHeaderConfig {
	h := p.headers
	return &authenticatorfactory.RequestHeaderConfig{
		CAContentProvider:   p.ca,
		UsernameHeaders:     headerrequest.StringSliceProviderFunc(h.UsernameHeaders),
		UIDHeaders:          headerrequest.StringSliceProviderFunc(h.UIDHeaders),
		GroupHeaders:        headerrequest.StringSliceProviderFunc(h.GroupHeaders),
		ExtraHeaderPrefixes: headerrequest.StringSliceProviderFunc(h.ExtraHeaderPrefixes),
		AllowedClientNames:  headerrequest.StringSliceProviderFunc(h.AllowedClientNames),
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serving the
// usage API needs the settings.
func (p *FrontProxy) NeedLeaderElection() bool { return false }

// Start reads the ConfigMap once, then watches it until ctx ends. A ConfigMap that cannot
// be read (no RBAC: the Role extension-apiserver-authentication-reader in kube-system) is
// logged, not fatal: bearer tokens still work, proxied requests are refused (401).
func (p *FrontProxy) Start(ctx context.Context) error {
	if err := p.ca.RunOnce(ctx); err != nil {
		p.log.Error(err, "front-proxy client CA not read; requests through the aggregation layer are refused until it is",
			"configMap", AuthenticationConfigMapNamespace+"/"+AuthenticationConfigMapName)
	}
	if err := p.headers.RunOnce(ctx); err != nil {
		p.log.Error(err, "front-proxy header names not read; requests through the aggregation layer are refused until they are",
			"configMap", AuthenticationConfigMapNamespace+"/"+AuthenticationConfigMapName)
	}
	go p.ca.Run(ctx, 1)
	go p.headers.Run(ctx, 1)
	<-ctx.Done()
	return nil
}
