package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// The usage API as the Kubernetes API server serves it through its aggregation layer
// (internal/usageapi's AggregatedPrefix; the plugin links no server code, a test checks the
// two agree).
const (
	// apiGroup is the aggregated API's group.
	apiGroup = "usage.ratelimit.dev"
	// apiGroupVersion is its group/version.
	apiGroupVersion = apiGroup + "/v1alpha1"
	// apiPrefix is its path on the API server.
	apiPrefix = "/apis/" + apiGroupVersion
	// apiServiceName is the APIService registering it.
	apiServiceName = "v1alpha1.usage.ratelimit.dev"
)

// apiServerClient is a client of the usage API through the Kubernetes API server, with the
// kubeconfig's rest.Config as kubectl uses it: the cluster's CA, and whatever credential the
// user has (client certificate, token, OIDC or exec plugin, impersonation). The API server
// authenticates and authorizes the request, then proxies it to the operator with the user's
// name: no credential reaches the operator. --token, --certificate-authority and
// --insecure-skip-tls-verify apply to the API server here, as in kubectl.
//
// It is client-go's HTTP client for the config, not a RESTClient: the usage API answers 429
// (a request would be denied) as an answer and paces overviews with Retry-After, which a
// RESTClient would retry on its own and hide.
func (o *connectionOptions) apiServerClient() (*usageClient, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("setting up the kubeconfig's credentials: %w", err)
	}
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig's server: %w", err)
	}
	hc.Timeout = requestTimeout
	return &usageClient{base: strings.TrimSuffix(host.String(), "/") + apiPrefix, http: hc, viaAPIServer: true}, nil
}

// apiServerHint adds to msg what a refusal by the API server itself (not by the usage
// server, which answers {"error": ...}) means and how to fix it.
func apiServerHint(code int, body []byte, msg string) string {
	var e errorBody
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return msg // the usage server's own answer, passed through
	}
	switch code {
	case http.StatusNotFound:
		return msg + ": the API server does not serve " + apiGroupVersion + " (no APIService " + apiServiceName +
			"): install the chart with usageApi.apiService.enabled=true (the default), or reach the usage server directly with --server"
	case http.StatusServiceUnavailable:
		return msg + ": the API server could not reach the operator's usage API; is the manager running? " +
			"`kubectl get apiservice " + apiServiceName + "` says why"
	case http.StatusForbidden:
		return msg + " (through the API server, usage needs RBAC in two API groups: " + apiGroup + " for the API server, policy.ratelimit.dev for the operator; the chart's ClusterRoles <release>-usage-reader and -usage-editor grant both)"
	}
	return msg
}
